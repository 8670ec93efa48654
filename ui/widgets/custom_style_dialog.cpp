#include "widgets/custom_style_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QVBoxLayout>

namespace tpui {

CustomStyleDialog::CustomStyleDialog(QWidget* parent)
    : QDialog(parent)
    , m_name(new QLineEdit)
    , m_base(new QComboBox)
    , m_input(new QComboBox)
    , m_output(new QComboBox)
    , m_summary(new QLabel)
    , m_code(new QPlainTextEdit)
    , m_buttons(new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel))
{
    setWindowTitle(tr("Custom Style"));
    m_name->setPlaceholderText(tr("e.g. colwise_gather_qkv"));
    m_base->addItems({QStringLiteral("colwise"), QStringLiteral("rowwise")});
    for (auto* c : {m_input, m_output})
        c->addItems({QStringLiteral("Replicate"), QStringLiteral("Shard(-1)")});
    m_output->setCurrentIndex(1);
    m_summary->setWordWrap(true);
    m_code->setReadOnly(true);
    m_code->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_code->setMinimumHeight(90);
    auto* form = new QFormLayout;
    form->addRow(tr("&Name:"), m_name);
    form->addRow(tr("&Base:"), m_base);
    form->addRow(tr("&Input layout:"), m_input);
    form->addRow(tr("&Output layout:"), m_output);
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(form);
    lay->addWidget(m_summary);
    lay->addWidget(new QLabel(tr("Registered by the Python export as:")));
    lay->addWidget(m_code);
    lay->addWidget(m_buttons);
    connect(m_buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(m_name, &QLineEdit::textChanged, this, &CustomStyleDialog::refresh);
    for (auto* c : {m_base, m_input, m_output})
        connect(c, &QComboBox::currentIndexChanged, this, &CustomStyleDialog::refresh);
    refresh();
}

tp::CustomStyleSpec CustomStyleDialog::spec() const
{
    return {m_name->text().trimmed().toStdString(), m_base->currentText().toStdString(),
            *tp::layoutFromName(m_input->currentText().toStdString()),
            *tp::layoutFromName(m_output->currentText().toStdString())};
}

void CustomStyleDialog::setSpec(const tp::CustomStyleSpec& s)
{
    m_name->setText(QString::fromStdString(s.name));
    m_base->setCurrentText(QString::fromStdString(s.base));
    m_input->setCurrentIndex(s.input == tp::Layout::ShardLast ? 1 : 0);
    m_output->setCurrentIndex(s.output == tp::Layout::ShardLast ? 1 : 0);
    refresh();
}

tp::Result<tp::Style> CustomStyleDialog::style() const { return tp::makeCustomStyle(spec()); }

QString CustomStyleDialog::registrationText() const { return m_code->toPlainText(); }

void CustomStyleDialog::refresh()
{
    const auto s = style();
    m_buttons->button(QDialogButtonBox::Ok)->setEnabled(s.ok());
    const auto torch = [](const QComboBox* c) { return c->currentIndex() == 1 ? QStringLiteral("Shard(-1)") : QStringLiteral("Replicate()"); };
    m_code->setPlainText(QStringLiteral("from torch.distributed.tensor import Replicate, Shard\n"
                                        "from transformers.distributed.tensor_parallel import ALL_PARALLEL_STYLES, %1\n\n"
                                        "ALL_PARALLEL_STYLES.register(\"%2\", %1(input_layouts=%3, output_layouts=%4))")
                             .arg(m_base->currentIndex() == 0 ? QStringLiteral("ColwiseParallel") : QStringLiteral("RowwiseParallel"),
                                  m_name->text().trimmed(), torch(m_input), torch(m_output)));
    if (!s.ok()) {
        m_summary->setText(QStringLiteral("<span style='color:#c0392b'>%1</span>").arg(QString::fromStdString(s.status().message()).toHtmlEscaped()));
        return;
    }
    m_summary->setText(tr("Weight %1, bias %2, forward collective <b>%3</b>. %4")
                           .arg(QString::fromStdString(s->weight2d.toString()), QString::fromStdString(s->bias.toString()),
                                QString::fromLatin1(tp::collectiveName(s->forward)), QString::fromStdString(s->description).toHtmlEscaped()));
}

} // namespace tpui
