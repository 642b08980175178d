import HTTPServer
import Testing

@Suite struct RouterTests {
    func router() -> Router<String> {
        var router = Router<String>()
        router.add("GET", "/v1/tickets", "list")
        router.add("POST", "/v1/tickets", "create")
        router.add("GET", "/v1/tickets/{id}", "get")
        router.add("GET", "/v1/tickets/open-count", "count")
        router.add("GET", "/v1/tickets/by-channel/{channelUrl}", "byChannel")
        router.add("POST", "/v1/tickets/{id}/close", "close")
        return router
    }

    func name(_ match: Router<String>.Match) -> String {
        switch match {
        case .found(let handler, _, let parameters):
            let pairs = parameters.pairs.sorted { $0.name < $1.name }.map { "\($0.name)=\($0.value)" }
            return handler + (parameters.isEmpty ? "" : ":" + pairs.joined(separator: ","))
        case .methodNotAllowed(let allowed, _): return "405 " + allowed.joined(separator: ",")
        case .notFound: return "404"
        }
    }

    @Test func literalsWinOverParameters() {
        #expect(name(router().match(method: "GET", path: "/v1/tickets/open-count")) == "count")
        #expect(name(router().match(method: "GET", path: "/v1/tickets/17")) == "get:id=17")
    }

    @Test func parametersCaptureAcrossNestedRoutes() {
        #expect(name(router().match(method: "POST", path: "/v1/tickets/9/close")) == "close:id=9")
        #expect(name(router().match(method: "GET", path: "/v1/tickets/by-channel/sendbird_group_channel_1")) == "byChannel:channelUrl=sendbird_group_channel_1")
    }

    @Test func wrongMethodListsAllowedOnes() {
        #expect(name(router().match(method: "DELETE", path: "/v1/tickets")) == "405 GET,HEAD,POST")
        #expect(name(router().match(method: "HEAD", path: "/v1/tickets")) == "list")
    }

    @Test func pathParametersKeepEveryNameOnceInOrder() {
        var parameters: PathParameters = ["a": "1", "b": "2"]
        parameters["c"] = "3"
        parameters["d"] = "4"
        parameters["b"] = "20"
        #expect(parameters.pairs.map { "\($0.name)=\($0.value)" } == ["a=1", "b=20", "c=3", "d=4"])
        parameters["a"] = nil
        #expect(parameters.pairs.map { "\($0.name)=\($0.value)" } == ["b=20", "c=3", "d=4"])
        parameters["c"] = nil
        parameters["d"] = nil
        #expect(parameters["b"] == "20" && parameters["c"] == nil && parameters.pairs.count == 1)
        parameters["b"] = nil
        #expect(parameters.isEmpty && parameters["b"] == nil)
        parameters["e"] = "5"
        #expect(parameters.pairs.map(\.name) == ["e"])
    }

    /// Segments are compared as whole byte strings: a prefix, a longer segment or one of the same length with other
    /// bytes is no literal's, and a literal branch that dead-ends falls back to the parameter.
    @Test func segmentsAreComparedWholeAndBacktrack() {
        var router = router()
        router.add("GET", "/", "root")
        router.add("GET", "/livez", "live")
        #expect(name(router.match(method: "GET", path: "/")) == "root")
        #expect(name(router.match(method: "GET", path: "//livez/")) == "live")
        #expect(name(router.match(method: "get", path: "/livez")) == "405 GET,HEAD")
        #expect(name(router.match(method: "GET", path: "/live")) == "404")
        #expect(name(router.match(method: "GET", path: "/livezz")) == "404")
        #expect(name(router.match(method: "GET", path: "/v1/ticket")) == "404")
        #expect(name(router.match(method: "GET", path: "/v1/tickets/open-counT")) == "get:id=open-counT")
        #expect(name(router.match(method: "POST", path: "/v1/tickets/open-count/close")) == "close:id=open-count")
        #expect(name(router.match(method: "GET", path: "/v1/tickets/by-channel")) == "get:id=by-channel")
        #expect(name(router.match(method: "GET", path: "/v1/tickets/caf\u{E9}")) == "get:id=caf\u{E9}")
    }

    @Test func unknownPathsAreNotFound() {
        #expect(name(router().match(method: "GET", path: "/v1/nothing")) == "404")
        #expect(name(router().match(method: "GET", path: "/v1/tickets/9/close/extra")) == "404")
        #expect(name(router().match(method: "GET", path: "/")) == "404")
    }
}
