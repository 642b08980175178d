import HTTPServer

extension TestPorts {
    /// A server made for a port from `free()` and started; made again for another port when that one was taken
    /// between the check and the bind (anything on the machine may bind a port of the range at any moment).
    public static func started(_ make: (Int) -> HTTPServer) throws -> HTTPServer {
        var attempt = 1
        while true {
            let server = make(free())
            do {
                try server.start()
                return server
            } catch let error as HTTPServerError where error.code == .startFailed && attempt < 5 {
                attempt += 1
            }
        }
    }
}
