internal import CMicroHTTPD
import Synchronization

/// Per-request state that lives in libmicrohttpd's `*con_cls` from the first callback to the completion callback.
///
/// Thread safety: libmicrohttpd calls the access handler for one connection on one thread at a time. The only
/// hand-off between threads is `response`, written by the async work before `MHD_resume_connection`, whose internal
/// mutex orders that write before the next access-handler call that reads it. `claimed` decides, exactly once,
/// who resumes a suspended connection (the work finishing, or a shutdown past its drain deadline).
final class RequestContext: @unchecked Sendable {
    // Unchecked: one thread at a time uses a context (libmicrohttpd's, or the task it was handed to), and the run-time
    // exclusivity check of a class's properties looked up thread-local state on every access (0.3 % of a cached read).
    @exclusivity(unchecked) var request: HTTPRequest
    @exclusivity(unchecked) var tooLarge = false
    @exclusivity(unchecked) var dispatched = false
    @exclusivity(unchecked) var response: HTTPResponse?
    let claimed = Atomic<Bool>(false)
    @exclusivity(unchecked) var connection: OpaquePointer?

    init(request: HTTPRequest) {
        self.request = request
    }

    /// The request lent in place for one call (the responder may fill in its path parameters): passing
    /// `context.request` as an argument copied it out of the object first (every string and array in it retained,
    /// then released).
    func withRequest<Result>(_ body: (inout HTTPRequest) -> Result) -> Result {
        body(&request)
    }
}
