//! Document evidence: `inspect_attachment_evidence` and `investigate_documents`.
//! (Being implemented; see the handlers.)

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::args::{EvidenceArgs, InvestigateArgs};
use super::{App, ToolError, ToolOutput};

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EvidenceOut {
    pub(crate) mailbox: String,
    pub(crate) status: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InvestigateOut {
    pub(crate) mailbox: String,
    pub(crate) status: String,
}

pub(crate) async fn inspect_attachment_evidence(
    app: Arc<App>,
    args: EvidenceArgs,
) -> Result<ToolOutput, ToolError> {
    super::not_yet(app, args).await
}

pub(crate) async fn investigate_documents(
    app: Arc<App>,
    args: InvestigateArgs,
) -> Result<ToolOutput, ToolError> {
    super::not_yet(app, args).await
}
