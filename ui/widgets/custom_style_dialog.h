// custom_style_dialog.h — defines a custom style: a name, colwise or rowwise, input and output
// layouts. Shows the placements and forward collective that follow, and the registration the
// Python export will write for Transformers.
#pragma once

#include "tp/plan/style.h"

#include <QDialog>

class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;

namespace tpui {

class CustomStyleDialog final : public QDialog
{
    Q_OBJECT
public:
    explicit CustomStyleDialog(QWidget* parent = nullptr);
    // The style as defined now; an error status while the form is invalid.
    tp::Result<tp::Style> style() const;
    void setSpec(const tp::CustomStyleSpec& spec);
    QString registrationText() const;

private:
    void refresh();
    tp::CustomStyleSpec spec() const;

    QLineEdit* m_name;
    QComboBox* m_base;
    QComboBox* m_input;
    QComboBox* m_output;
    QLabel* m_summary;
    QPlainTextEdit* m_code;
    QDialogButtonBox* m_buttons;
};

} // namespace tpui
