import DBus
import Testing

@Suite("DBusValue, signatures and match rules (no bus)")
struct DBusValueTests {
    @Test func signaturesOfNestedValues() {
        #expect(DBusValue.properties([:]).signature == "a{sv}")
        #expect(DBusValue.bytes([]).signature == "ay")
        #expect(DBusValue.structure([.string("a"), .array(elementSignature: "o", [])]).signature == "(sao)")
        let managed = DBusValue.dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", [:])
        #expect(managed.signature == "a{oa{sa{sv}}}")
    }

    @Test(arguments: [
        ("a{oa{sa{sv}}}", true), ("(ii)", true), ("aai", true), ("v", true),
        ("a", false), ("a{vs}", false), ("()", false), ("(i", false), ("ii", false), ("z", false), ("", false),
    ])
    func singleCompleteTypeValidation(_ text: String, _ valid: Bool) {
        #expect(DBusSignature(text).isSingleCompleteType == valid)
    }

    @Test func signatureSplitsIntoCompleteTypes() {
        #expect(DBusSignature("sa{sv}(ib)ay").completeTypes == ["s", "a{sv}", "(ib)", "ay"])
        #expect(DBusSignature("").completeTypes == [])
        #expect(DBusSignature("a{").completeTypes == nil)
    }

    @Test func malformedValuesAreRefusedWithAReason() {
        #expect(DBusValue.objectPath("no/leading/slash").marshallingProblem?.contains("object path") == true)
        #expect(DBusValue.objectPath("/trailing/").marshallingProblem != nil)
        #expect(DBusValue.array(elementSignature: "s", [.int32(1)]).marshallingProblem == "array of s holds a i element")
        #expect(DBusValue.dictionary(keySignature: "v", valueSignature: "s", [:]).marshallingProblem != nil)
        #expect(DBusValue.structure([]).marshallingProblem == "empty struct")
        #expect(DBusValue.string("nul\u{0}inside").marshallingProblem != nil)
        #expect(DBusValue.properties(["ok": .objectPath("/a/b")]).marshallingProblem == nil)
    }

    @Test func accessorsUnwrapVariantsAndRejectWrongShapes() {
        let value = DBusValue.variant(.variant(.stringArray(["a", "b"])))
        #expect(value.stringArray == ["a", "b"])
        #expect(value.bytes == nil)
        #expect(DBusValue.int16(-3).int32 == nil)
        #expect(DBusValue.properties(["RSSI": .int16(-40)]).propertyDictionary == ["RSSI": .int16(-40)])
    }

    @Test func pathAncestry() {
        let device: DBusObjectPath = "/org/bluez/hci0/dev_AA"
        #expect(device.isEqualOrDescendant(of: "/org/bluez"))
        #expect(device.isEqualOrDescendant(of: "/"))
        #expect(!device.isEqualOrDescendant(of: "/org/bluez/hci"))
        #expect(DBusObjectPath("/").isValid && !DBusObjectPath("").isValid && !DBusObjectPath("/a//b").isValid)
    }

    @Test func matchRuleTextAndLocalMatching() {
        let rule = DBusMatchRule(
            interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded", arg0Path: "/org/bluez/")
        #expect(rule.description
            == "type='signal',interface='org.freedesktop.DBus.ObjectManager',member='InterfacesAdded',arg0path='/org/bluez/'")
        let added = DBusMessage(
            kind: .signal, path: "/", interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesAdded",
            body: [.objectPath("/org/bluez/hci0"), .properties([:])])
        #expect(rule.matches(added))
        var elsewhere = added
        elsewhere.body[0] = .objectPath("/org/other")
        #expect(!rule.matches(elsewhere))
        var call = added
        call.kind = .methodCall
        #expect(!rule.matches(call))
        #expect(DBusMatchRule(arg0: "it's").description == "type='signal',arg0='it'\\''s'")
    }

    @Test func errorDescriptionIsNameColonMessage() {
        let error = DBusError(name: "org.bluez.Error.InProgress", message: "In Progress")
        #expect(error.description == "org.bluez.Error.InProgress: In Progress")
        #expect(DBusError(name: DBusError.noReply, message: "").isTimeout)
        #expect(DBusError(name: "org.example.E", message: "").description == "org.example.E")
    }
}
