#if canImport(Glibc)
import Glibc
#endif

/// A finished span of a trace (what OpenTelemetry exports): a request the gateway served, or a call it made for one.
public struct Span: Sendable {
    public enum Kind: Int, Sendable {
        case server = 2
        case client = 3
        case `internal` = 1
    }

    public let context: TraceContext
    public let name: String
    public let kind: Kind
    /// Wall-clock times, nanoseconds since 1970.
    public let startNanos: UInt64
    public let endNanos: UInt64
    public let attributes: [(key: String, value: SpanValue)]
    /// Whether the span failed (a 5xx answered, a Desk call that did not succeed).
    public let failed: Bool

    public init(context: TraceContext, name: String, kind: Kind, startNanos: UInt64, endNanos: UInt64,
                attributes: [(key: String, value: SpanValue)], failed: Bool) {
        self.context = context
        self.name = name
        self.kind = kind
        self.startNanos = startNanos
        self.endNanos = max(startNanos, endNanos)
        self.attributes = attributes
        self.failed = failed
    }

    /// Now on the wall clock, in the span's unit.
    public static func now() -> UInt64 { WallClock.nanos() }

    /// The wall-clock time of a monotonic instant (`MonotonicClock.nanos()`) in the recent past.
    public static func wallNanos(ofMonotonic instant: Int64) -> UInt64 {
        let nanos = UInt64(max(0, MonotonicClock.nanos() - instant))
        let now = Self.now()
        return now > nanos ? now - nanos : 0
    }
}

/// The wall clock as seconds since 1970: the one spelling for every cache, bucket and stamp that keeps time.
/// `Date()` reads the same clock through Foundation and the 2001 reference date and back (in the cached read's
/// profile 0.65 % of the samples, against 0.25 % for this).
public enum WallClock {
    public static func seconds() -> Double {
        let time = read()
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// The same reading as whole nanoseconds (a span's unit).
    public static func nanos() -> UInt64 {
        let time = read()
        return UInt64(max(0, time.tv_sec)) &* 1_000_000_000 &+ UInt64(max(0, time.tv_nsec))
    }

    private static func read() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }
}

/// The monotonic clock as whole nanoseconds. Every request reads it twice (its start, its latency): a
/// `ContinuousClock.Instant` made and subtracted there cost 128-bit multiplications and divisions per request.
public enum MonotonicClock {
    public static func nanos() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    }
}

public enum SpanValue: Sendable, Equatable {
    case string(String)
    case int(Int)
}

/// Where finished spans go (an OTLP exporter); the request path only hands them over.
public protocol SpanRecorder: Sendable {
    func record(_ span: Span)
}
