fn main() -> std::process::ExitCode {
    cca::main()
}
