#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// posix_spawn + waitpid: child processes whose exit is observed directly, independent of any run loop or signal
/// handler, with stdout and stderr sent to a file.
public enum ChildProcess {
    public enum Failure: Error, CustomStringConvertible, Sendable {
        case cannotStart(SystemError)
        case lost(SystemError)
        case timedOut(program: String, seconds: Double)

        public var description: String {
            switch self {
            case .cannotStart(let error): return "cannot start: \(error)"
            case .lost(let error): return "lost track of the child: \(error)"
            case .timedOut(let program, let seconds): return "\(program) did not finish within \(Int(seconds)) s"
            }
        }
    }

    /// Runs `argv` (the first item a path) to its end; returns its exit status, -1 when a signal ended it. Past
    /// `timeout` seconds it is killed.
    public static func run(_ argv: [String], outputPath: String, timeout: Double) throws(Failure) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pid: pid_t = 0
        let cArgs = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArgs, environ)
        guard spawned == 0 else { throw .cannotStart(SystemError("posix_spawn", argv[0], code: spawned)) }
        let deadline = Date().addingTimeInterval(timeout)
        var status: Int32 = 0
        while true {
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid { break }
            if done < 0 { throw .lost(SystemError("waitpid", argv[0])) }
            if Date() > deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                throw .timedOut(program: argv[0], seconds: timeout)
            }
            usleep(10_000)
        }
        // WIFEXITED / WEXITSTATUS are macros Swift cannot import.
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
    }
}
