#include "tp/core/status.h"

namespace tp {

const char* statusCodeName(StatusCode code)
{
    switch (code) {
    case StatusCode::Ok: return "ok";
    case StatusCode::InvalidArgument: return "invalid argument";
    case StatusCode::NotFound: return "not found";
    case StatusCode::DataLoss: return "data loss";
    case StatusCode::Unimplemented: return "unimplemented";
    case StatusCode::FailedPrecondition: return "failed precondition";
    case StatusCode::OutOfRange: return "out of range";
    case StatusCode::ResourceExhausted: return "resource exhausted";
    case StatusCode::Cancelled: return "cancelled";
    case StatusCode::DeadlineExceeded: return "deadline exceeded";
    case StatusCode::Internal: return "internal error";
    }
    return "unknown";
}

std::string Status::toString() const
{
    if (ok())
        return "ok";
    return std::string(statusCodeName(m_code)) + ": " + m_message;
}

Status& Status::withContext(const std::string& context)
{
    if (!ok())
        m_message = context + ": " + m_message;
    return *this;
}

} // namespace tp
