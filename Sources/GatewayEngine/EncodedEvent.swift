/// One session event with its wire form made once: the JSON value and its compact text, shared by every sink that
/// needs them (stdout, the session store, the relay, the webhook) instead of each encoding the event again.
public struct EncodedEvent: Sendable, Equatable {
    public let event: SessionEvent
    public let value: JSONValue
    /// Compact JSON with sorted keys, without a newline.
    public let json: String

    public init(_ event: SessionEvent) {
        self.event = event
        value = event.jsonValue
        json = value.jsonString
    }
}
