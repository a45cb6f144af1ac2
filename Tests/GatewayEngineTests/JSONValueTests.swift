import GatewayEngine
import Testing

@Suite struct JSONValueTests {
    @Test func parsesEveryKind() throws {
        let v = try JSONValue(parsing: #" {"a":[1,-2.5,1e3,true,false,null,"x\u00e9\ud83d\ude00\n"],"b":{}} "#)
        #expect(v == .object([
            "a": .array([.int(1), .double(-2.5), .double(1000), .bool(true), .bool(false), .null, .string("xé😀\n")]),
            "b": .object([:]),
        ]))
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "\"abc", "tru", "{} x", "[\"\\ud800\"]", "{1:2}",
                      "\"\u{01}\"", "1e400"])
    func rejectsMalformedInput(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
    }

    @Test func boundsNesting() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep, maxDepth: 64) }
        #expect((try? JSONValue(parsing: deep, maxDepth: 128)) != nil)
    }

    @Test func reportsWhereReadingStopped() {
        do {
            _ = try JSONValue(parsing: #"{"a": tru}"#)
            Issue.record("parsed")
        } catch {
            #expect(error.offset >= 6)
            #expect("\(error)".contains("invalid JSON at byte"))
        }
    }

    /// The character where reading stopped is named as sent: a byte order mark was shown as 'ï' (its first byte
    /// read as Latin-1), 'é' as 'Ã'.
    @Test func namesTheUnexpectedCharacterAsSent() {
        func reason(_ bytes: [UInt8]) -> String? {
            do { _ = try JSONValue(parsing: bytes); return nil } catch { return error.reason }
        }
        #expect(reason(Array("\u{FEFF}{\"type\":\"ping\"}".utf8)) == "a byte order mark (U+FEFF): send the JSON without it")
        #expect(reason(Array("é".utf8)) == "unexpected character 'é' (U+00E9)")
        #expect(reason(Array("x".utf8)) == "unexpected character 'x'")
        #expect(reason([0x01]) == "unexpected character U+0001")
        #expect(reason([0xFF, 0x7B]) == "a byte (0xFF) that is not UTF-8")
    }

    @Test func writesDoublesAsDoublesAndEscapesStrings() {
        #expect(JSONValue.double(72).jsonString == "72.0")
        #expect(JSONValue.double(0.1).jsonString == "0.1")
        #expect(JSONValue.double(-0.0).jsonString == "0.0", "no sign on a zero")
        #expect(JSONValue.double((-0.04 * 10).rounded() / 10).jsonString == "0.0")
        #expect(JSONValue.int(72).jsonString == "72")
        #expect(JSONValue.string("a\"b\\c\u{01}").jsonString == #""a\"b\\c\u0001""#)
        #expect(JSONValue.object(["b": .int(1), "a": .int(2)]).jsonString == #"{"a":2,"b":1}"#)
    }

    @Test func integralDoublesReadAsIntegers() throws {
        #expect(try JSONValue(parsing: "30.0").intValue == 30)
        #expect(try JSONValue(parsing: "30.5").intValue == nil)
        #expect(try JSONValue(parsing: "30").doubleValue == 30)
    }
}
