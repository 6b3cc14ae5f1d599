//! The `mailgate` binary: parse the command line, run, exit with the code `run` returns.
fn main() {
    std::process::exit(mailgate::run());
}
