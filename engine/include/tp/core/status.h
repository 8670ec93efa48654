// status.h — errors as values for the TP Studio engine.
//
// The engine never throws across its API and never exits: every fallible call returns a `Status`
// or a `Result<T>`. Messages name the file, key or module at fault, so a front end can show them
// as they are.
//
//   tp::Result<SafetensorsHeader> h = readSafetensorsHeader(path);
//   if (!h) return h.status();             // propagate
//   TP_ASSIGN_OR_RETURN(auto cfg, parseConfig(json, path));
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace tp {

// The most specific code wins: InvalidArgument for bad user input (files, plans, flags),
// DataLoss for a corrupt or truncated file, NotFound for a missing path or key.
enum class StatusCode {
    Ok,
    InvalidArgument,
    NotFound,
    DataLoss,
    Unimplemented,
    FailedPrecondition,
    OutOfRange,
    ResourceExhausted,
    Cancelled,
    DeadlineExceeded,
    Internal,
};

const char* statusCodeName(StatusCode code);

class [[nodiscard]] Status final
{
public:
    Status() = default;
    Status(StatusCode code, std::string message)
        : m_code(code)
        , m_message(std::move(message))
    {
    }

    [[nodiscard]] bool ok() const { return m_code == StatusCode::Ok; }
    StatusCode code() const { return m_code; }
    const std::string& message() const { return m_message; }
    // "<code>: <message>", or "ok".
    std::string toString() const;

    // Prepends context ("while opening X: ") and returns *this, for errors passed upwards.
    Status& withContext(const std::string& context);

private:
    StatusCode m_code = StatusCode::Ok;
    std::string m_message;
};

inline Status okStatus() { return {}; }
inline Status invalidArgument(std::string m) { return {StatusCode::InvalidArgument, std::move(m)}; }
inline Status notFound(std::string m) { return {StatusCode::NotFound, std::move(m)}; }
inline Status dataLoss(std::string m) { return {StatusCode::DataLoss, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::Unimplemented, std::move(m)}; }
inline Status failedPrecondition(std::string m) { return {StatusCode::FailedPrecondition, std::move(m)}; }
inline Status internalError(std::string m) { return {StatusCode::Internal, std::move(m)}; }

// Result<T> — a T or the Status that explains why there is none.
template<typename T>
class [[nodiscard]] Result final
{
public:
    Result(T value)
        : m_v(std::move(value))
    {
    }
    Result(Status status)
        : m_v(std::move(status))
    {
        if (std::get<Status>(m_v).ok())
            m_v = Status(StatusCode::Internal, "Result constructed from an ok Status without a value");
    }

    [[nodiscard]] bool ok() const { return std::holds_alternative<T>(m_v); }
    explicit operator bool() const { return ok(); }

    // The error; an ok Status when a value is held.
    Status status() const { return ok() ? Status() : std::get<Status>(m_v); }

    // Precondition for all accessors: ok().
    T& value() & { return std::get<T>(m_v); }
    const T& value() const& { return std::get<T>(m_v); }
    T&& value() && { return std::get<T>(std::move(m_v)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

private:
    std::variant<T, Status> m_v;
};

} // namespace tp

#define TP_STATUS_CONCAT_INNER(a, b) a##b
#define TP_STATUS_CONCAT(a, b) TP_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define TP_RETURN_IF_ERROR(expr)                                                                                      \
    do {                                                                                                              \
        ::tp::Status tp_status_ = (expr);                                                                             \
        if (!tp_status_.ok())                                                                                         \
            return tp_status_;                                                                                        \
    } while (false)

// Declares/assigns `lhs` from the value of a Result expression, or returns its Status.
#define TP_ASSIGN_OR_RETURN(lhs, expr) TP_ASSIGN_OR_RETURN_IMPL(TP_STATUS_CONCAT(tp_result_, __LINE__), lhs, expr)
#define TP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                                      \
    auto tmp = (expr);                                                                                                \
    if (!tmp.ok())                                                                                                    \
        return tmp.status();                                                                                          \
    lhs = std::move(tmp).value()
