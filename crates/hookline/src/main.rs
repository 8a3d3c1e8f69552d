//! The `hookline` command: publish events, provision topics, manage endpoints.

mod commands;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc, not glibc's malloc: a delivery allocates many small, short-lived buffers, and
/// glibc's malloc and free took a fifth of the dispatcher's CPU (docs/PERFORMANCE.md). Built
/// without transparent huge pages (`no_thp` in the workspace's Cargo.toml): they cost memory
/// and saved no CPU measurably.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
