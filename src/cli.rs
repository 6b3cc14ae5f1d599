//! The command line: `serve`, `tools`, `call`, `policy …`, `demo`, `handoff …`, `index …`.
//!
//! Invariant: every command resolves the environment and the config through the same startup path
//! as `serve`, so what `tools`, `call` and `policy explain` report is what the server would do
//! (`handoff …` is the exception: an operator tool that needs no config, see `handoff_cli`).
//! Command output goes to stdout through [`write_out`]; diagnostics go to stderr via tracing or,
//! for the one startup-failure line, [`fail`]. MCP serving itself (the stdio session, handshake
//! failures) is `crate::transport::serve`'s: this module parses arguments and dispatches.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Parser, Subcommand};
use rmcp::model::JsonObject;

use crate::config::Settings;
use crate::config::env::Env;
use crate::console::write_out;
use crate::error::StartupError;
use crate::gates::Gates;
use crate::startup::{build_app, load_settings};
use crate::tools::{App, CallError};
use crate::transport::http::HttpSettings;
use crate::transport::serve::{Session, serve_stdio};

#[derive(Parser)]
#[command(
    name = "mailgate",
    version,
    about = "Policy-first MCP gateway to allowlisted mailboxes"
)]
struct Cli {
    /// plugin.json to use (default: OUTLOOK_PLUGIN_CONFIG, else ~/.config/mailgate/plugin.json,
    /// else the reference plugin's ~/.config/mcp-outlook/plugin.json)
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over stdio with the catalog the gates select
    Serve {
        /// Serve the read-only catalog over loopback Streamable HTTP at ADDR (default
        /// OUTLOOK_HTTP_HOST:OUTLOOK_HTTP_PORT, i.e. 127.0.0.1:3010) instead
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
        http: Option<String>,
    },
    /// List the tools of the catalog the current environment would build
    Tools,
    /// Run one tool through the server's validation and handler path and print the result
    Call {
        /// Tool name, e.g. search_mailbox
        tool: String,
        /// Arguments as a JSON object
        #[arg(default_value = "{}")]
        json: String,
    },
    /// Reviewer commands
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Create the fictional demo mailboxes and serve them (a guided tour on a terminal)
    Demo {
        /// Recreate the demo mailboxes from scratch
        #[arg(long)]
        reset: bool,
        /// Serve MCP over stdio even when stdin is a terminal
        #[arg(long, conflicts_with = "http")]
        serve: bool,
        /// Serve the demo's read-only catalog over loopback Streamable HTTP (as `serve --http`)
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
        http: Option<String>,
    },
    /// Operator commands for the local handoff store (no plugin.json needed)
    Handoff {
        #[command(subcommand)]
        command: crate::handoff_cli::HandoffCommand,
    },
    /// Operator commands for the local search index (sync, status, pause, resume, rebuild,
    /// purge); never MCP tools
    Index {
        #[command(subcommand)]
        command: crate::index_cli::IndexCommand,
    },
    /// Operator commands for delegated sign-ins (login, status, logout) of the mailboxes whose
    /// backend names "auth"; never MCP tools
    Auth {
        #[command(subcommand)]
        command: crate::auth_cli::AuthCommand,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print the catalog, mailboxes, outbound rules, disk roots, limits and permissions in force
    Explain {
        /// Print instead what the remote person of plugin.json principals LABEL reaches over HTTP
        #[arg(long, value_name = "LABEL")]
        principal: Option<String>,
    },
    /// Exit non-zero when the configuration would fail at startup
    Check,
    /// Write policy/catalog.toml and policy/catalogs/*.json (the golden files) into DIR
    Export {
        /// Existing directory to write into (normally the repository's policy/)
        #[arg(long, default_value = "policy")]
        out: PathBuf,
    },
}

/// Runs the CLI and returns the process exit code.
pub fn run() -> i32 {
    // The extraction worker (`extract::pool` starts it) reads nothing else: no .env, no config,
    // no logging set-up, no runtime.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == crate::extract::worker::SUBCOMMAND)
    {
        return crate::extract::worker::main();
    }
    let cli = Cli::parse();
    let env = match Env::capture() {
        Ok(env) => env,
        Err(err) => return fail(&StartupError::Config(err)),
    };
    let (level, bad_log_level) = crate::telemetry::log_level(
        env.get(crate::config::MAILGATE_LOG_VAR),
        env.get(crate::config::LOG_LEVEL_VAR),
    );
    crate::telemetry::init_tracing(level);
    if bad_log_level {
        tracing::warn!(
            "LOG_LEVEL is not one of error, warn, info, debug; the default level applies"
        );
    }
    crate::telemetry::install_panic_hook();
    // 8 MiB worker stacks (reserved address space, touched only as used): the IMAP response
    // parser recurses per nesting level, and `backends::imap::shield` bounds the nesting with a
    // margin sized for this stack even in a debug build.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(8 << 20)
        .build()
    {
        Ok(rt) => rt,
        Err(err) => return fail(&StartupError::Transport(err.kind().to_string())),
    };
    match runtime.block_on(dispatch(cli, &env)) {
        Ok(code) => code,
        Err(err) => fail(&err),
    }
}

/// The one place a startup failure is printed: a single line, then a non-zero exit.
fn fail(err: &StartupError) -> i32 {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "mailgate: {err}");
    1
}

fn settings(env: &Env, config: Option<&Path>) -> Result<(Settings, Gates), StartupError> {
    Ok(load_settings(env, config)?)
}

/// The app for `gates`, with what the environment adds: the embeddings endpoint and the shared
/// database (its schema checked and its cursor key ring read before anything is served).
async fn app(env: &Env, s: &Settings, gates: Gates) -> Result<Arc<App>, StartupError> {
    use crate::index::store::postgres::{self, instance::SharedDatabase};
    let shared = match postgres::resolve(env)? {
        Some(pg) => Some(
            SharedDatabase::open(pg)
                .await
                .map_err(|e| StartupError::IndexStore(e.to_string()))?,
        ),
        None => None,
    };
    build_app(s, gates, crate::embed::Semantic::from_env(env)?, shared)
}

async fn dispatch(cli: Cli, env: &Env) -> Result<i32, StartupError> {
    let config = cli.config.as_deref();
    match cli.command {
        Command::Serve { http: Some(addr) } => {
            let (s, _gates) = settings(env, config)?;
            serve_http(env, &s, &addr).await
        }
        Command::Serve { http: None } => {
            let (s, gates) = settings(env, config)?;
            let app = app(env, &s, gates).await?;
            serve_stdio(app).await.map(|_| 0)
        }
        Command::Tools => {
            let (s, gates) = settings(env, config)?;
            let app = app(env, &s, gates).await?;
            let names: Vec<&str> = app.tools.iter().map(|t| t.name).collect();
            write_out(&names.join("\n"))?;
            Ok(0)
        }
        Command::Call { tool, json } => {
            let (s, gates) = settings(env, config)?;
            let app = app(env, &s, gates).await?;
            call_and_print(&app, &tool, &json).await
        }
        Command::Policy { command } => policy(command, env, config).await,
        Command::Demo { .. } if config.is_some() => Err(StartupError::Usage(
            "demo uses its own plugin.json; --config does not apply to it".into(),
        )),
        Command::Demo { reset, serve, http } => demo(env, reset, serve, http.as_deref()).await,
        Command::Handoff { command } => crate::handoff_cli::run(command, env),
        Command::Index { command } => crate::index_cli::run(command, env, config).await,
        Command::Auth { command } => {
            let (s, gates) = settings(env, config)?;
            crate::auth_cli::run(command, env, &s, &gates).await
        }
    }
}

/// Runs one call; exit 0 on success, 1 on a tool error, 2 on invalid arguments (not a JSON
/// object, or refused by the tool's schema: `INVALID_ARGUMENT`) or a tool outside the catalog.
async fn call_and_print(app: &Arc<App>, tool: &str, json: &str) -> Result<i32, StartupError> {
    let print_error = |err: &crate::tools::ToolError| {
        let value = serde_json::json!({
            "isError": true,
            "error": { "code": err.code.as_str(), "message": err.message },
        });
        write_out(&serde_json::to_string_pretty(&value).unwrap_or_default())
    };
    let raw: JsonObject = match serde_json::from_str(json) {
        Ok(serde_json::Value::Object(map)) => map,
        // What a client's SDK would refuse before sending: the same exit code as a schema
        // refusal, and serde_json's text (which quotes the input) is not printed.
        _ => {
            print_error(&crate::tools::ToolError::new(
                crate::tools::ErrorCode::InvalidArgument,
                "the arguments must be a JSON object",
            ))?;
            return Ok(2);
        }
    };
    match app
        .call(Arc::new(crate::caller::Caller::Operator), tool, raw)
        .await
    {
        Ok(out) => {
            let rendered = out.render();
            let value = rendered
                .structured_content
                .unwrap_or(serde_json::Value::Null);
            write_out(&serde_json::to_string_pretty(&value).unwrap_or_default())?;
            Ok(0)
        }
        Err(CallError::UnknownTool) => {
            // The operator's own argument, so it is named here (unlike over MCP).
            let message = match CallError::unknown_tool_message(tool, true) {
                std::borrow::Cow::Borrowed(plain) => format!("{plain}: {tool}"),
                std::borrow::Cow::Owned(hint) => hint,
            };
            write_out(
                &serde_json::json!({ "protocolError": "invalid_params", "message": message })
                    .to_string(),
            )?;
            Ok(2)
        }
        Err(err) => {
            let code = if matches!(err, CallError::InvalidParams(_)) {
                2
            } else {
                1
            };
            if let Some(err) = err.into_tool_error() {
                print_error(&err)?;
            }
            Ok(code)
        }
    }
}

/// The statuses of the aliases' indexes in the shared store, when one is configured.
async fn shared_statuses(
    env: &Env,
    s: &Settings,
) -> Result<Option<crate::report::SharedStatuses>, StartupError> {
    match crate::index::store::postgres::resolve(env)? {
        Some(pg) => Ok(Some(crate::index_cli::shared_statuses(s, &pg).await?)),
        None => Ok(None),
    }
}

async fn policy(
    command: PolicyCommand,
    env: &Env,
    config: Option<&Path>,
) -> Result<i32, StartupError> {
    match command {
        PolicyCommand::Explain { principal: None } => {
            let (s, gates) = settings(env, config)?;
            let shared = shared_statuses(env, &s).await?;
            write_out(&crate::report::explain(&s, &gates, shared.as_ref()))?;
            Ok(0)
        }
        PolicyCommand::Explain {
            principal: Some(label),
        } => {
            let (s, _gates) = settings(env, config)?;
            write_out(&crate::report::explain_principal(&s, env, &label)?)?;
            Ok(0)
        }
        PolicyCommand::Check => {
            let (s, gates) = settings(env, config)?;
            let app = app(env, &s, gates).await?;
            write_out(&format!(
                "ok: the configuration starts; catalog of {} tools",
                app.tools.len()
            ))?;
            Ok(0)
        }
        PolicyCommand::Export { out } => {
            let dir = crate::path_guard::open_dir(&out).map_err(|e| {
                StartupError::Usage(format!("cannot open the output folder ({})", e.kind()))
            })?;
            let _ = dir.create_dir("catalogs");
            for (name, contents) in crate::report::golden_files() {
                dir.write(&name, contents.as_bytes())
                    .map_err(|e| StartupError::Output(e.kind()))?;
            }
            write_out("policy files written")?;
            Ok(0)
        }
    }
}

/// `serve --http`: the gates were resolved (a misspelled or half-configured gate still refuses
/// to start) but the app is built read-only whatever they say (security.md §7).
async fn serve_http(env: &Env, s: &Settings, addr: &str) -> Result<i32, StartupError> {
    let http = HttpSettings::resolve(env, addr)?;
    let app = app(env, s, Gates::read_only()).await?;
    crate::transport::http::serve_http(app, http).await?;
    Ok(0)
}

async fn demo(
    env: &Env,
    reset: bool,
    serve: bool,
    http: Option<&str>,
) -> Result<i32, StartupError> {
    let state = crate::config::state_dir(env)?;
    let config_path = crate::demo::setup(&state, reset)?;
    let (s, gates) = settings(env, Some(&config_path))?;
    if let Some(addr) = http {
        return serve_http(env, &s, addr).await;
    }
    let app = app(env, &s, gates).await?;
    if serve || !std::io::stdin().is_terminal() {
        if serve_stdio(app).await? == Session::LeftBeforeInitialize {
            // Someone ran `demo --serve` by hand with stdin that is not a client.
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(
                stderr,
                "mailgate: no MCP client on stdin (it ended before `initialize`); run `{exe} demo` \
                 on a terminal for the tour, or let an MCP client start `{exe} demo --serve`",
                exe = crate::demo::this_exe()
            );
        }
        Ok(0)
    } else {
        write_out(&crate::demo::tour(&app, &config_path).await)?;
        Ok(0)
    }
}
