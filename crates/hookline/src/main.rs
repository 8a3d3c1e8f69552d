//! The `hookline` command: publish events, provision topics, manage endpoints.

mod commands;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    commands::init_tracing(cli.global.log_format);
    match cli.run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", commands::error_line(&error));
            ExitCode::FAILURE
        }
    }
}
