#if canImport(Glibc)
import Glibc
#endif

/// Writing files so that what was written survives a crash: whole writes, fsync, and replacement by rename.
public enum Files {
    /// Writes all of `bytes` to `fd` (short writes continued, EINTR retried).
    public static func writeAll(_ bytes: [UInt8], to fd: Int32, name: String) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw SystemError("write", name)
            }
            offset += written
        }
    }

    /// Writes what it can of `bytes` to `fd`, giving up at the first failure (a log line is not worth blocking for).
    public static func writeBestEffort(_ bytes: [UInt8], to fd: Int32) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            offset += written
        }
    }

    /// Opens `path` for appending (created with mode 0600 when missing).
    public static func openForAppend(_ path: String) throws(SystemError) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemError("open", path) }
        return fd
    }

    /// Creates or truncates `path` for writing (mode 0600).
    public static func create(_ path: String) throws(SystemError) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemError("open", path) }
        return fd
    }

    public static func sync(_ fd: Int32, name: String) throws(SystemError) {
        guard fsync(fd) == 0 else { throw SystemError("fsync", name) }
    }

    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// Replaces `path` with `temporary` in one step.
    public static func replace(_ path: String, with temporary: String) throws(SystemError) {
        guard rename(temporary, path) == 0 else { throw SystemError("rename", "\(temporary) → \(path)") }
    }
}
