/// Trimming and blank checks without Foundation: its `CharacterSet` trimming goes through NSString, and a file that
/// imports it gets Foundation's slower `contains` and `range(of:)` for every string search.
extension StringProtocol {
    /// Without the spaces and tabs RFC 9110 allows around a field value and each item of a list (OWS).
    package func trimmingOWS() -> SubSequence { trimming { $0 == " " || $0 == "\t" } }

    /// Without the characters `drop` names at either end.
    package func trimming(_ drop: (Character) -> Bool) -> SubSequence {
        guard let first = firstIndex(where: { !drop($0) }), let last = lastIndex(where: { !drop($0) }) else { return self[endIndex...] }
        return self[first...last]
    }

    /// Nothing but Unicode white space, line breaks and the zero-width space included (as Foundation's
    /// `whitespacesAndNewlines`, which this replaced): what "must not be blank" refuses.
    package var isBlank: Bool { unicodeScalars.allSatisfy { $0.properties.isWhitespace || $0 == "\u{200B}" } }
}
