#!/usr/bin/python3
"""A scriptable fake `org.bluez` (bluetoothd) for hardware-free tests of the strap code.

Run with the system python (python3-dbus, python3-gi) against a private bus:

    /usr/bin/python3 Tests/Fixtures/fake_bluez.py --address unix:path=/tmp/bus

It owns `org.bluez` (the BlueZ objects, shaped like BlueZ 5.66) and `org.hrgateway.FakeBlueZ` (a control
interface at /control that tests use to script scenarios). When both names are owned it prints `READY` on stdout.

BlueZ behaviour reproduced (docs/ble.md §3, §5): ObjectManager on `/` with InterfacesAdded/Removed; adapters with
SetDiscoveryFilter/StartDiscovery/StopDiscovery/RemoveDevice; devices appear when discovery runs and the strap
advertises; Device1.Connect sets Connected then ServicesResolved; notify sessions per D-Bus sender that survive
disconnects and are re-armed on reconnect; Value PropertiesChanged per notification; Battery1; Device Information,
Body Sensor Location and Battery Level reads; scripted Connect outcomes (le-connection-abort-by-local, InProgress,
objects missing after ServicesResolved, never resolving, generic failure), link loss, a dead link that stays
Connected, device removal with
UnknownObject afterwards, and a bluetoothd restart (the name is dropped and owned again; all state is rebuilt).
With AddPMD, Polar's Measurement Data service (control point and data; ECG from a recording at 130 Hz, or at the
strap's own rate after SetECGRate, its settings still saying 130 Hz as an H10's do) that, like an
H10, refuses the control point on an unencrypted link (ATT error 0x05) until Device1.Pair, and a strap that forgot
its bond (ForgetBond: still Paired for BlueZ; connecting fails as bluetoothd's encrypted connect does, until the
device is removed and paired again).
"""

import argparse
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
CONTROL_NAME = "org.hrgateway.FakeBlueZ"
CONTROL_IFACE = "org.hrgateway.FakeBlueZ1"
OM = "org.freedesktop.DBus.ObjectManager"
PROPS = "org.freedesktop.DBus.Properties"
ADAPTER = "org.bluez.Adapter1"
DEVICE = "org.bluez.Device1"
BATTERY = "org.bluez.Battery1"
SERVICE = "org.bluez.GattService1"
CHAR = "org.bluez.GattCharacteristic1"
GATT_MANAGER = "org.bluez.GattManager1"
ADV_MANAGER = "org.bluez.LEAdvertisingManager1"


def uuid16(short):
    return "0000%04x-0000-1000-8000-00805f9b34fb" % short


PMD_SERVICE = "fb005c80-02e7-f387-1cad-8acd2d8df0c8"
PMD_CONTROL = "fb005c81-02e7-f387-1cad-8acd2d8df0c8"
PMD_DATA = "fb005c82-02e7-f387-1cad-8acd2d8df0c8"
PMD_ECG_RATE = 130
PMD_ECG_PER_FRAME = 73


def pmd_acc_frame(sensor_ns, samples):
    """A PMD accelerometer frame (type 2, frame type 1: x, y, z as int16 LE milli-g)."""
    out = [0x02] + list(int(sensor_ns).to_bytes(8, "little")) + [0x01]
    for x, y, z in samples:
        for v in (x, y, z):
            out += list(int(v).to_bytes(2, "little", signed=True))
    return out


def pmd_ecg_frame(sensor_ns, values):
    """A PMD ECG data frame (type 0, frame type 0: 3-byte signed µV), written independently of the Swift decoder:
    measurement type, the last sample's sensor time (ns, uint64 LE), frame type, the samples."""
    out = [0x00] + list(int(sensor_ns).to_bytes(8, "little")) + [0x00]
    for v in values:
        out += list(int(v).to_bytes(3, "little", signed=True))
    return out


def hrm_payload(hr, rr, contact=True):
    """Heart Rate Measurement bytes, written independently of the Swift encoder."""
    flags = 0x06 if contact else 0x00
    body = []
    if hr > 255:
        flags |= 0x01
        body += [hr & 0xFF, hr >> 8]
    else:
        body.append(hr)
    if rr:
        flags |= 0x10
        for v in rr:
            body += [v & 0xFF, (v >> 8) & 0xFF]
    return [flags] + body


def paced_payloads(rr, max_per_packet=9):
    """1 Hz packets: each carries the beats that ended in its second (oldest first)."""
    packets, end, t, i, recent = [], 0, 1024, 0, []
    while i < len(rr):
        batch = []
        while i < len(rr) and end + rr[i] <= t and len(batch) < max_per_packet:
            end += rr[i]
            batch.append(rr[i])
            i += 1
        recent = (recent + batch)[-4:]
        basis = recent or [rr[0]]
        hr = int(round(60 * 1024 / (sum(basis) / len(basis))))
        packets.append(hrm_payload(hr, batch))
        t += 1024
    return packets


def byte_array(values):
    return dbus.Array([dbus.Byte(b) for b in values], signature="y")


class BlueZError(dbus.DBusException):
    def __init__(self, name, message=""):
        super().__init__(message)
        self._dbus_error_name = name


class Object(dbus.service.Object):
    """An exported object with BlueZ-style properties: interface -> {name: dbus value}."""

    def __init__(self, fake, path):
        self.fake = fake
        self.path = path
        self.props = {}
        self.exported = False

    def export(self):
        if not self.exported:
            dbus.service.Object.__init__(self, self.fake.bus, self.path)
            self.exported = True

    def unexport(self):
        if self.exported:
            self.remove_from_connection()
            self.exported = False

    def set(self, iface, **changes):
        self.props[iface].update(changes)
        if self.exported and self.fake.visible(self):
            self.PropertiesChanged(iface, dbus.Dictionary(changes, signature="sv"), dbus.Array([], signature="s"))

    @dbus.service.method(PROPS, in_signature="ss", out_signature="v")
    def Get(self, iface, name):
        try:
            return self.props[iface][name]
        except KeyError:
            raise BlueZError("org.freedesktop.DBus.Error.InvalidArgs", "No such property '%s'" % name)

    @dbus.service.method(PROPS, in_signature="s", out_signature="a{sv}")
    def GetAll(self, iface):
        return dbus.Dictionary(self.props.get(iface, {}), signature="sv")

    @dbus.service.method(PROPS, in_signature="ssv")
    def Set(self, iface, name, value):
        if name not in self.props.get(iface, {}):
            raise BlueZError("org.freedesktop.DBus.Error.InvalidArgs", "No such property '%s'" % name)
        if iface == ADAPTER and name == "Powered":
            self.set(iface, Powered=dbus.Boolean(value))
            return
        raise BlueZError("org.freedesktop.DBus.Error.PropertyReadOnly", "Property '%s' is not writable" % name)

    @dbus.service.signal(PROPS, signature="sa{sv}as")
    def PropertiesChanged(self, iface, changed, invalidated):
        pass


AGENT_MANAGER = "org.bluez.AgentManager1"
AGENT = "org.bluez.Agent1"


class AgentManager(dbus.service.Object):
    """AgentManager1 on /org/bluez: agents registered per D-Bus sender (bluetoothd keeps one per client)."""

    def __init__(self, fake):
        self.fake = fake
        dbus.service.Object.__init__(self, fake.bus, "/org/bluez")

    @dbus.service.method(AGENT_MANAGER, in_signature="os", sender_keyword="sender")
    def RegisterAgent(self, path, capability, sender=None):
        self.fake.record("RegisterAgent %s" % capability, "/org/bluez", sender, str(path))
        if sender in self.fake.agents:
            raise BlueZError("org.bluez.Error.AlreadyExists", "Already Exists")
        self.fake.agents[sender] = (str(path), str(capability))

    @dbus.service.method(AGENT_MANAGER, in_signature="o", sender_keyword="sender")
    def UnregisterAgent(self, path, sender=None):
        self.fake.record("UnregisterAgent", "/org/bluez", sender, str(path))
        if self.fake.agents.get(sender, (None,))[0] != str(path):
            raise BlueZError("org.bluez.Error.DoesNotExist", "Does Not Exist")
        del self.fake.agents[sender]

    @dbus.service.method(AGENT_MANAGER, in_signature="o", sender_keyword="sender")
    def RequestDefaultAgent(self, path, sender=None):
        self.fake.record("RequestDefaultAgent", "/org/bluez", sender, str(path))


class Root(dbus.service.Object):
    def __init__(self, fake):
        self.fake = fake
        dbus.service.Object.__init__(self, fake.bus, "/")

    @dbus.service.method(OM, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        self.fake.record("GetManagedObjects", "/")
        result = dbus.Dictionary({}, signature="oa{sa{sv}}")
        for obj in self.fake.all_objects():
            if self.fake.visible(obj):
                result[dbus.ObjectPath(obj.path)] = dbus.Dictionary(
                    {i: dbus.Dictionary(p, signature="sv") for i, p in obj.props.items()}, signature="sa{sv}")
        return result

    @dbus.service.signal(OM, signature="oa{sa{sv}}")
    def InterfacesAdded(self, path, interfaces):
        pass

    @dbus.service.signal(OM, signature="oas")
    def InterfacesRemoved(self, path, interfaces):
        pass


class Characteristic(Object):
    def __init__(self, fake, device, service_path, handle, short, flags, value=(), uuid=None):
        super().__init__(fake, "%s/char%04x" % (service_path, handle))
        self.device = device
        self.props[CHAR] = {
            "UUID": dbus.String(uuid or uuid16(short)),
            "Service": dbus.ObjectPath(service_path),
            "Value": byte_array(value),
            "Flags": dbus.Array(flags, signature="s"),
            "Handle": dbus.UInt16(handle),
        }
        if "notify" in flags or "indicate" in flags:
            self.props[CHAR]["Notifying"] = dbus.Boolean(False)
        self.short = short
        self.value = list(value)
        self.sessions = set()
        self.start_notify_outcomes = []

    @dbus.service.method(CHAR, in_signature="a{sv}", out_signature="ay", sender_keyword="sender")
    def ReadValue(self, options, sender=None):
        self.fake.record("ReadValue", self.path, sender)
        if not self.device.connected:
            raise BlueZError("org.bluez.Error.Failed", "Not connected")
        if "read" not in self.props[CHAR]["Flags"]:
            raise BlueZError("org.bluez.Error.NotPermitted", "Read not permitted")
        self.set(CHAR, Value=byte_array(self.value))
        return byte_array(self.value)

    @dbus.service.method(CHAR, in_signature="aya{sv}", sender_keyword="sender")
    def WriteValue(self, value, options, sender=None):
        self.fake.record("WriteValue %s" % bytes(int(b) for b in value).hex(), self.path, sender)
        if "write" not in self.props[CHAR]["Flags"]:
            raise BlueZError("org.bluez.Error.NotPermitted", "Write not permitted")
        if not self.device.connected:
            raise BlueZError("org.bluez.Error.Failed", "Not connected")
        if self.device.pmd and self is self.device.pmd.control:
            self.device.pmd.write([int(b) for b in value])

    @dbus.service.method(CHAR, sender_keyword="sender")
    def StartNotify(self, sender=None):
        self.fake.record("StartNotify", self.path, sender)
        if "notify" not in self.props[CHAR]["Flags"] and "indicate" not in self.props[CHAR]["Flags"]:
            raise BlueZError("org.bluez.Error.NotSupported", "Operation is not supported")
        if self.start_notify_outcomes:
            outcome = self.start_notify_outcomes.pop(0)
            if outcome == "inprogress":
                self.sessions.add(sender)
                raise BlueZError("org.bluez.Error.InProgress", "In Progress")
        self.fake.watch_sender(sender)
        self.sessions.add(sender)
        if self.device.connected and not self.props[CHAR]["Notifying"]:
            self.set(CHAR, Notifying=dbus.Boolean(True))

    @dbus.service.method(CHAR, sender_keyword="sender")
    def StopNotify(self, sender=None):
        self.fake.record("StopNotify", self.path, sender)
        if sender not in self.sessions:
            raise BlueZError("org.bluez.Error.Failed", "No notify session started")
        self.sessions.discard(sender)
        if not self.sessions and self.props[CHAR]["Notifying"]:
            self.set(CHAR, Notifying=dbus.Boolean(False))

    def notify(self, payload):
        if not self.device.connected or not self.sessions or not self.exported or self.device.stalled:
            return False
        self.value = list(payload)
        # CLOCK_MONOTONIC just before the signal goes out: the benchmarks measure latency from here.
        self.fake.sent_at.append(time.monotonic_ns())
        self.set(CHAR, Value=byte_array(payload))
        return True


class Device(Object):
    def __init__(self, fake, adapter, address, name, rr, advertise_uuid=True, battery=85, battery1=True):
        super().__init__(fake, "%s/dev_%s" % (adapter.path, address.upper().replace(":", "_")))
        self.adapter = adapter
        self.address = address.upper()
        self.name = name
        self.rr = list(rr)
        self.advertise_uuid = advertise_uuid
        self.battery1 = battery1
        self.advertising = True
        self.present = False      # in GetManagedObjects (found by discovery, not removed)
        self.removed = False      # removed after being known: calls fail with UnknownObject
        self.connected = False
        self.stalled = False      # the link is dead but still Connected: notifications are lost
        self.gatt_exported = False
        self.connect_outcomes = []
        self.pending_other_connect = False
        self.hung_connect = None
        self.packet_index = 0
        self.packets = paced_payloads(self.rr) if self.rr else []
        uuids = [uuid16(0x180D), uuid16(0x180F), uuid16(0x180A)] if advertise_uuid else []
        self.props[DEVICE] = {
            "Address": dbus.String(self.address),
            "AddressType": dbus.String("random"),
            "Name": dbus.String(name),
            "Alias": dbus.String(name),
            "Adapter": dbus.ObjectPath(adapter.path),
            "UUIDs": dbus.Array(uuids, signature="s"),
            "RSSI": dbus.Int16(-60),
            "Connected": dbus.Boolean(False),
            "ServicesResolved": dbus.Boolean(False),
            "Paired": dbus.Boolean(False),
            "Bonded": dbus.Boolean(False),
            "Trusted": dbus.Boolean(False),
            "Blocked": dbus.Boolean(False),
            "LegacyPairing": dbus.Boolean(False),
            "Appearance": dbus.UInt16(0x0341),
            "ManufacturerData": dbus.Dictionary(
                {dbus.UInt16(0x006B): dbus.Array([dbus.Byte(b) for b in (0x33, 0x00, 0x00, 0x38)], signature="y")},
                signature="qv"),
            "ServicesResolvedAt": dbus.UInt64(0),
        }
        del self.props[DEVICE]["ServicesResolvedAt"]
        if battery1:
            self.props[BATTERY] = {"Percentage": dbus.Byte(battery)}
        self.gatt = []
        base = self.path
        hrs = Object(fake, base + "/service000c")
        hrs.props[SERVICE] = {"UUID": dbus.String(uuid16(0x180D)), "Primary": dbus.Boolean(True),
                              "Device": dbus.ObjectPath(base), "Handle": dbus.UInt16(0x000c)}
        self.hrm = Characteristic(fake, self, hrs.path, 0x000d, 0x2A37, ["notify"])
        bsl = Characteristic(fake, self, hrs.path, 0x0010, 0x2A38, ["read"], [1])
        bas = Object(fake, base + "/service0020")
        bas.props[SERVICE] = {"UUID": dbus.String(uuid16(0x180F)), "Primary": dbus.Boolean(True),
                              "Device": dbus.ObjectPath(base), "Handle": dbus.UInt16(0x0020)}
        self.battery_char = Characteristic(fake, self, bas.path, 0x0021, 0x2A19, ["read", "notify"], [battery])
        dis = Object(fake, base + "/service0030")
        dis.props[SERVICE] = {"UUID": dbus.String(uuid16(0x180A)), "Primary": dbus.Boolean(True),
                              "Device": dbus.ObjectPath(base), "Handle": dbus.UInt16(0x0030)}
        strings = [(0x2A29, "Polar Electro Oy"), (0x2A24, "H10"), (0x2A25, "C0680226"),
                   (0x2A27, "39044024.10"), (0x2A26, "3.1.1"), (0x2A28, "3.1.1")]
        dis_chars = [Characteristic(fake, self, dis.path, 0x0031 + 2 * i, u, ["read"], list(s.encode()))
                     for i, (u, s) in enumerate(strings)]
        self.gatt = [hrs, self.hrm, bsl, bas, self.battery_char, dis] + dis_chars
        self.pmd = None
        self.forgot_bond = False   # the strap lost its keys: encryption fails although BlueZ says Paired
        self.pair_outcomes = []

    # Discovery and lifetime

    def appear(self):
        if self.present:
            return
        self.present = True
        self.removed = False
        self.export()
        self.fake.interfaces_added(self)
        if self.connected and not self.gatt_exported:
            self.export_gatt()

    def remove(self):
        """Drops the device and its GATT objects (InterfacesRemoved); later calls fail with UnknownObject."""
        if not self.present:
            return
        self.connected = False
        for obj in reversed(self.gatt):
            if obj.exported and self.gatt_exported:
                self.fake.interfaces_removed(obj)
        self.gatt_exported = False
        self.fake.interfaces_removed(self)
        self.present = False
        self.removed = True
        self.props[DEVICE]["Connected"] = dbus.Boolean(False)
        self.props[DEVICE]["ServicesResolved"] = dbus.Boolean(False)
        # Removing a device drops its bond on both sides once it pairs again.
        self.props[DEVICE]["Paired"] = dbus.Boolean(False)
        self.props[DEVICE]["Bonded"] = dbus.Boolean(False)

    def export_gatt(self):
        if self.gatt_exported:
            return
        self.gatt_exported = True
        for obj in self.gatt:
            obj.export()
            self.fake.interfaces_added(obj)

    def unexport_gatt(self):
        if not self.gatt_exported:
            return
        for obj in reversed(self.gatt):
            self.fake.interfaces_removed(obj)
        self.gatt_exported = False

    def check_exists(self):
        if self.removed or not self.present:
            raise BlueZError("org.freedesktop.DBus.Error.UnknownObject",
                             "Method \"Connect\" with signature \"\" on interface \"org.bluez.Device1\" doesn't exist")

    # Device1

    @dbus.service.method(DEVICE, sender_keyword="sender", async_callbacks=("ok", "err"))
    def Connect(self, sender=None, ok=None, err=None):
        self.fake.record("Connect", self.path, sender)
        try:
            self.check_exists()
        except BlueZError as e:
            err(e)
            return
        if self.pending_other_connect:
            err(BlueZError("org.bluez.Error.InProgress", "In Progress"))
            return
        if self.connected:
            err(BlueZError("org.bluez.Error.AlreadyConnected", "Already Connected"))
            return
        if not self.adapter.props[ADAPTER]["Powered"]:
            err(BlueZError("org.bluez.Error.Failed", "le-connection-adapter-not-powered"))
            return
        outcome = self.connect_outcomes.pop(0) if self.connect_outcomes else "ok"
        if outcome == "ok" and self.forgot_bond and self.props[DEVICE]["Paired"]:
            # bluetoothd connects to a bonded device encrypted (src/device.c: "Elevating security level since LTK is
            # available"); a strap without the key fails that, and BlueZ 5.66's att_connect_cb answers Connect with
            # le-connection-abort-by-local, every time, the device still Paired.
            outcome = "abort"
        if outcome == "ok" and not self.advertising:
            outcome = "failed:le-connection-timeout"
        if outcome.startswith("failed:"):
            err(BlueZError("org.bluez.Error.Failed", outcome[len("failed:"):]))
        elif outcome == "inprogress":
            err(BlueZError("org.bluez.Error.InProgress", "In Progress"))
        elif outcome == "abort":
            # bluetoothd did connect briefly: Connected true, the error, then Connected false.
            self.set_connected(True)
            err(BlueZError("org.bluez.Error.Failed", "le-connection-abort-by-local"))
            GLib.idle_add(lambda: self.link_loss() and False)
        elif outcome == "hang":
            # Never answers until Disconnect cancels it (a strap that stopped advertising mid-connect).
            self.hung_connect = err
        elif outcome == "noresolve":
            self.set_connected(True)
            ok()
        elif outcome == "nogatt":
            # ServicesResolved=true announced while the GATT objects are not exported (bluez#1489).
            self.set_connected(True)
            ok()
            GLib.idle_add(lambda: self.set(DEVICE, ServicesResolved=dbus.Boolean(True)) and False)
        else:
            self.set_connected(True)
            ok()
            GLib.idle_add(self.resolve)

    def resolve(self):
        if self.connected:
            self.export_gatt()
            self.set(DEVICE, ServicesResolved=dbus.Boolean(True))
            if self.hrm.sessions and not self.hrm.props[CHAR]["Notifying"]:
                self.hrm.set(CHAR, Notifying=dbus.Boolean(True))   # re-armed by bluetoothd, nobody asked
        return False

    def set_connected(self, value):
        self.connected = value
        self.set(DEVICE, Connected=dbus.Boolean(value))

    @dbus.service.method(DEVICE, sender_keyword="sender")
    def Disconnect(self, sender=None):
        self.fake.record("Disconnect", self.path, sender)
        self.check_exists()
        if self.pending_other_connect:
            self.pending_other_connect = False      # cancels the stale pending Connect
            return
        if self.hung_connect is not None:
            err, self.hung_connect = self.hung_connect, None
            err(BlueZError("org.bluez.Error.Failed", "Operation was cancelled"))
            return
        if not self.connected:
            raise BlueZError("org.bluez.Error.NotConnected", "Not Connected")
        self.link_loss()

    def link_loss(self):
        if not self.connected:
            return True
        self.connected = False
        self.stalled = False
        if self.props[DEVICE]["ServicesResolved"]:
            self.set(DEVICE, ServicesResolved=dbus.Boolean(False))
        self.set(DEVICE, Connected=dbus.Boolean(False))
        if self.hrm.props[CHAR]["Notifying"]:
            self.hrm.set(CHAR, Notifying=dbus.Boolean(False))
        if self.pmd:
            self.pmd.link_lost()
        return True

    @dbus.service.method(DEVICE, sender_keyword="sender", async_callbacks=("ok", "err"))
    def Pair(self, sender=None, ok=None, err=None):
        self.fake.record("Pair", self.path, sender)
        try:
            self.check_exists()
            if self.props[DEVICE]["Paired"]:
                raise BlueZError("org.bluez.Error.AlreadyExists", "Already Exists")
            outcome = self.pair_outcomes.pop(0) if self.pair_outcomes else "ok"
            if outcome.startswith("failed:"):
                raise BlueZError("org.bluez.Error." + outcome[len("failed:"):], outcome[len("failed:"):])
        except BlueZError as e:
            err(e)
            return

        def paired():
            # Pair connects when it must, as bluetoothd does.
            if not self.connected:
                self.set_connected(True)
                GLib.idle_add(self.resolve)
            self.forgot_bond = False
            self.set(DEVICE, Paired=dbus.Boolean(True), Bonded=dbus.Boolean(True))
            ok()

        agent = self.fake.agents.get(sender)
        if agent is None:
            paired()   # no agent: bluetoothd pairs Just Works as NoInputNoOutput
            return
        # Just Works with an agent: bluetoothd asks it to authorize the pairing.
        proxy = self.fake.bus.get_object(sender, agent[0])
        proxy.RequestAuthorization(dbus.ObjectPath(self.path), dbus_interface=AGENT,
                                   reply_handler=paired,
                                   error_handler=lambda e: err(BlueZError("org.bluez.Error.AuthenticationRejected",
                                                                          "Authentication Rejected")))

    @property
    def encrypted(self):
        return bool(self.props[DEVICE]["Paired"]) and not self.forgot_bond

    def next_packets(self, count):
        out = []
        for _ in range(count):
            if self.packet_index >= len(self.packets):
                break
            out.append(self.packets[self.packet_index])
            self.packet_index += 1
        return out


class PMD:
    """Polar's Measurement Data service as an H10 serves it: the control point (read features, write requests,
    indicate responses) and the data characteristic (notify frames). With `require_pairing`, like the H10, a write
    on an unencrypted link fails with ATT error 0x05 (insufficient authentication)."""

    def __init__(self, fake, device, ecg_uv, require_pairing):
        self.device = device
        self.ecg = list(ecg_uv)
        self.require_pairing = require_pairing
        self.silent = False   # takes requests but never answers them (SilencePMD)
        self.ecg_on = False
        self.acc_hz = None
        self.acc_index = 0
        self.index = 0
        # The rate the strap really samples at (SetECGRate): a real H10's "130 Hz" is 128-131 Hz; it says 130.
        self.ecg_rate = PMD_ECG_RATE
        # The strap's own clock (ns): it has been running for a while, unrelated to the host's.
        self.sensor_ns = 599_000_000_000
        base = device.path
        svc = Object(fake, base + "/service0040")
        svc.props[SERVICE] = {"UUID": dbus.String(PMD_SERVICE), "Primary": dbus.Boolean(True),
                              "Device": dbus.ObjectPath(base), "Handle": dbus.UInt16(0x0040)}
        self.control = Characteristic(fake, device, svc.path, 0x0041, 0, ["read", "write", "indicate"],
                                      [0x0F, 0x05, 0x00], uuid=PMD_CONTROL)
        self.data = Characteristic(fake, device, svc.path, 0x0044, 0, ["notify"], uuid=PMD_DATA)
        device.gatt += [svc, self.control, self.data]
        uuids = list(device.props[DEVICE]["UUIDs"]) + [PMD_SERVICE]
        device.props[DEVICE]["UUIDs"] = dbus.Array(uuids, signature="s")

    def respond(self, payload):
        GLib.idle_add(lambda: self.control.notify(payload) and False)

    def write(self, value):
        if self.require_pairing and not self.device.encrypted:
            raise BlueZError("org.bluez.Error.Failed", "Operation failed with ATT error: 0x05")
        if not value:
            raise BlueZError("org.bluez.Error.InvalidValueLength", "Invalid Length")
        if self.silent:
            return
        op, kind = value[0], value[1] if len(value) > 1 else 0xFF
        if op == 0x01 and kind == 0x00:      # GET_MEASUREMENT_SETTINGS ECG: 130 Hz, 14 bit
            self.respond([0xF0, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x82, 0x00, 0x01, 0x01, 0x0E, 0x00])
        elif op == 0x02 and kind == 0x00:    # REQUEST_MEASUREMENT_START ECG
            if self.ecg_on:
                self.respond([0xF0, 0x02, 0x00, 0x06, 0x00])   # already in state
            else:
                self.ecg_on = True
                self.respond([0xF0, 0x02, 0x00, 0x00, 0x00])
        elif op == 0x02 and kind == 0x02:    # REQUEST_MEASUREMENT_START ACC: 01 rate, 01 resolution, 02 range
            settings = {value[i]: int.from_bytes(bytes(value[i + 2:i + 4]), "little")
                        for i in range(2, len(value) - 3, 4) if value[i + 1] == 1}
            if settings.get(0) not in (25, 50, 100, 200):
                self.respond([0xF0, 0x02, 0x02, 0x08, 0x00])    # invalid sample rate
            else:
                self.acc_hz = settings[0]
                self.respond([0xF0, 0x02, 0x02, 0x00, 0x00])
        elif op == 0x03 and kind == 0x00:    # STOP_MEASUREMENT ECG
            self.ecg_on = False
            self.respond([0xF0, 0x03, 0x00, 0x00, 0x00])
        else:
            self.respond([0xF0, op, kind, 0x03, 0x00])          # not supported

    def send_ecg(self, frames):
        """Notifies up to `frames` frames of 73 samples from the recording; returns the samples sent."""
        sent = 0
        for _ in range(frames):
            if not self.ecg_on or self.index >= len(self.ecg):
                break
            chunk = self.ecg[self.index:self.index + PMD_ECG_PER_FRAME]
            last_ns = self.sensor_ns + round((self.index + len(chunk) - 1) * 1_000_000_000 / self.ecg_rate)
            if not self.data.notify(pmd_ecg_frame(last_ns, chunk)):
                break
            self.index += len(chunk)
            sent += len(chunk)
        return sent

    @staticmethod
    def acc_sample(i):
        """Milli-g: gravity on z and a slow sway on x and y (synthetic: this only carries bytes)."""
        return (i % 50 - 25, (i * 7) % 31 - 15, 1000 - i % 3)

    def send_acc(self, frames, per_frame=36):
        sent = 0
        for _ in range(frames):
            if not self.acc_hz:
                break
            chunk = [self.acc_sample(self.acc_index + k) for k in range(per_frame)]
            last_ns = 2_000_000_000 + (self.acc_index + per_frame - 1) * 1_000_000_000 // self.acc_hz
            if not self.data.notify(pmd_acc_frame(last_ns, chunk)):
                break
            self.acc_index += per_frame
            sent += per_frame
        return sent

    def link_lost(self):
        self.ecg_on = False   # a strap stops its streams when the link goes
        self.acc_hz = None


class Adapter(Object):
    def __init__(self, fake, name, address, powered=True):
        super().__init__(fake, "/org/bluez/" + name)
        self.name = name
        self.discovering_clients = set()
        self.filters = {}
        self.start_discovery_outcomes = []
        self.registered_apps = {}
        self.registered_ads = {}
        self.props[ADAPTER] = {
            "Address": dbus.String(address),
            "AddressType": dbus.String("public"),
            "Name": dbus.String("fake-" + name),
            "Alias": dbus.String("fake-" + name),
            "Class": dbus.UInt32(0),
            "Powered": dbus.Boolean(powered),
            "PowerState": dbus.String("on" if powered else "off"),
            "Discoverable": dbus.Boolean(False),
            "Pairable": dbus.Boolean(True),
            "Discovering": dbus.Boolean(False),
            "UUIDs": dbus.Array([], signature="s"),
            "Roles": dbus.Array(["central", "peripheral"], signature="s"),
        }
        self.props[GATT_MANAGER] = {}
        self.props[ADV_MANAGER] = {
            "ActiveInstances": dbus.Byte(0), "SupportedInstances": dbus.Byte(5),
            "SupportedIncludes": dbus.Array(["tx-power", "appearance", "local-name"], signature="s"),
        }

    @dbus.service.method(ADAPTER, in_signature="a{sv}", sender_keyword="sender")
    def SetDiscoveryFilter(self, filt, sender=None):
        self.fake.record("SetDiscoveryFilter", self.path, sender, dict(filt))
        self.filters[sender] = dict(filt)

    @dbus.service.method(ADAPTER, out_signature="as")
    def GetDiscoveryFilters(self):
        return dbus.Array(["UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern"],
                          signature="s")

    @dbus.service.method(ADAPTER, sender_keyword="sender")
    def StartDiscovery(self, sender=None):
        self.fake.record("StartDiscovery", self.path, sender)
        if not self.props[ADAPTER]["Powered"]:
            raise BlueZError("org.bluez.Error.NotReady", "Resource Not Ready")
        outcome = self.start_discovery_outcomes.pop(0) if self.start_discovery_outcomes else "ok"
        if outcome == "inprogress":
            raise BlueZError("org.bluez.Error.InProgress", "Operation already in progress")
        if sender in self.discovering_clients:
            raise BlueZError("org.bluez.Error.InProgress", "Operation already in progress")
        self.fake.watch_sender(sender)
        self.discovering_clients.add(sender)
        if not self.props[ADAPTER]["Discovering"]:
            self.set(ADAPTER, Discovering=dbus.Boolean(True))
        # "stale": accepted, Discovering true, and nothing scanned, as bluetoothd 5.66 answers after a StopDiscovery
        # the kernel refused left its state stale (the controller no longer scans, a new session with the same
        # filter is not restarted).
        if outcome != "stale":
            GLib.idle_add(self.scan)

    def scan(self):
        if self.props[ADAPTER]["Discovering"]:
            for dev in self.fake.devices_of(self):
                if dev.advertising and self.wanted(dev):
                    dev.appear()
        return False

    def wanted(self, dev):
        """As bluetoothd's is_filter_match: a device is reported if one discovering client's filter takes it; within
        a filter, UUIDs (any advertised) and Pattern (prefix of address or name) must both match."""
        advertised = [str(u).lower() for u in dev.props[DEVICE]["UUIDs"]]
        for client in self.discovering_clients:
            filt = self.filters.get(client, {})
            uuids = [str(u).lower() for u in filt.get("UUIDs", [])]
            pattern = str(filt.get("Pattern", ""))
            if uuids and not any(u in advertised for u in uuids):
                continue
            if pattern and not (dev.address.startswith(pattern) or dev.name.startswith(pattern)):
                continue
            return True
        return False

    @dbus.service.method(ADAPTER, sender_keyword="sender")
    def StopDiscovery(self, sender=None):
        self.fake.record("StopDiscovery", self.path, sender)
        if sender not in self.discovering_clients:
            raise BlueZError("org.bluez.Error.Failed", "No discovery started")
        self.drop_client(sender)

    def drop_client(self, sender):
        self.discovering_clients.discard(sender)
        self.filters.pop(sender, None)
        if not self.discovering_clients and self.props[ADAPTER]["Discovering"]:
            self.set(ADAPTER, Discovering=dbus.Boolean(False))

    @dbus.service.method(ADAPTER, in_signature="o", sender_keyword="sender")
    def RemoveDevice(self, path, sender=None):
        self.fake.record("RemoveDevice", self.path, sender, str(path))
        for dev in self.fake.devices_of(self):
            if dev.path == path and dev.present:
                dev.remove()
                # Discovery still running: the strap's next advertisement brings the device back.
                GLib.timeout_add(50, self.scan)
                return
        raise BlueZError("org.bluez.Error.DoesNotExist", "Does Not Exist")

    # Peripheral side, for the strap emulator.

    @dbus.service.method(GATT_MANAGER, in_signature="oa{sv}", sender_keyword="sender")
    def RegisterApplication(self, app, options, sender=None):
        self.fake.record("RegisterApplication", self.path, sender, str(app))
        objects = self.fake.bus.get_object(sender, app).GetManagedObjects(dbus_interface=OM)
        if not any(SERVICE in ifaces for ifaces in objects.values()):
            raise BlueZError("org.bluez.Error.Failed", "No valid services found")
        self.registered_apps[(sender, str(app))] = objects

    @dbus.service.method(GATT_MANAGER, in_signature="o", sender_keyword="sender")
    def UnregisterApplication(self, app, sender=None):
        self.fake.record("UnregisterApplication", self.path, sender, str(app))
        if self.registered_apps.pop((sender, str(app)), None) is None:
            raise BlueZError("org.bluez.Error.DoesNotExist", "Does Not Exist")

    @dbus.service.method(ADV_MANAGER, in_signature="oa{sv}", sender_keyword="sender")
    def RegisterAdvertisement(self, adv, options, sender=None):
        self.fake.record("RegisterAdvertisement", self.path, sender, str(adv))
        props = self.fake.bus.get_object(sender, adv).GetAll("org.bluez.LEAdvertisement1", dbus_interface=PROPS)
        if "Type" not in props:
            raise BlueZError("org.bluez.Error.InvalidArguments", "Invalid arguments in method call")
        self.registered_ads[(sender, str(adv))] = props

    @dbus.service.method(ADV_MANAGER, in_signature="o", sender_keyword="sender")
    def UnregisterAdvertisement(self, adv, sender=None):
        self.fake.record("UnregisterAdvertisement", self.path, sender, str(adv))
        if self.registered_ads.pop((sender, str(adv)), None) is None:
            raise BlueZError("org.bluez.Error.DoesNotExist", "Does Not Exist")


class Control(dbus.service.Object):
    """Test-side control of the fake. Addresses are `AA:BB:CC:DD:EE:FF`."""

    def __init__(self, fake):
        self.fake = fake
        dbus.service.Object.__init__(self, fake.bus, "/control")

    def dev(self, address):
        for d in self.fake.devices:
            if d.address == address.upper():
                return d
        raise BlueZError("org.hrgateway.FakeBlueZ.Error.NoSuchDevice", "no strap " + address)

    def adapter(self, name):
        for a in self.fake.adapters:
            if a.name == name:
                return a
        raise BlueZError("org.hrgateway.FakeBlueZ.Error.NoSuchAdapter", "no adapter " + name)

    @dbus.service.method(CONTROL_IFACE, in_signature="ssb", out_signature="o")
    def AddAdapter(self, name, address, powered):
        a = Adapter(self.fake, name, address, powered)
        self.fake.adapters.append(a)
        if self.fake.owns_bluez:
            a.export()
            self.fake.interfaces_added(a)
        return a.path

    @dbus.service.method(CONTROL_IFACE, in_signature="sb")
    def SetPowered(self, name, powered):
        a = self.adapter(name)
        a.set(ADAPTER, Powered=dbus.Boolean(powered), PowerState=dbus.String("on" if powered else "off"))
        if not powered:
            a.registered_ads.clear()      # the controller lost its advertising sets
            for d in self.fake.devices_of(a):
                d.link_loss()
            for c in list(a.discovering_clients):
                a.drop_client(c)

    @dbus.service.method(CONTROL_IFACE, in_signature="sssaqbyb", out_signature="o")
    def AddStrap(self, adapter, address, name, rr, advertise_uuid, battery, battery1):
        d = Device(self.fake, self.adapter(adapter), address, name, [int(x) for x in rr],
                   bool(advertise_uuid), int(battery), bool(battery1))
        self.fake.devices.append(d)
        a = d.adapter
        if a.props[ADAPTER]["Discovering"]:
            GLib.idle_add(a.scan)
        return d.path

    @dbus.service.method(CONTROL_IFACE, in_signature="saib")
    def AddPMD(self, address, ecg_uv, require_pairing):
        """Gives the strap Polar's PMD service (before it connects), streaming `ecg_uv` (µV at 130 Hz)."""
        d = self.dev(address)
        d.pmd = PMD(self.fake, d, [int(v) for v in ecg_uv], bool(require_pairing))

    @dbus.service.method(CONTROL_IFACE, in_signature="su", out_signature="u")
    def SendECG(self, address, frames):
        """Notifies up to `frames` ECG frames (73 samples) if the client started ECG; returns the samples sent."""
        return self.dev(address).pmd.send_ecg(int(frames))

    @dbus.service.method(CONTROL_IFACE, in_signature="sd")
    def SetECGRate(self, address, hz):
        """The rate the strap's ECG really runs at on its own clock (its settings still say 130 Hz, as an H10's do)."""
        self.dev(address).pmd.ecg_rate = float(hz)

    @dbus.service.method(CONTROL_IFACE, in_signature="suu")
    def StreamECG(self, address, frames, interval_ms):
        """Notifies up to `frames` ECG frames, one every `interval_ms` ms from the main loop (returns at once); with
        `interval_ms` 0, one every 73 samples at the strap's own rate (SetECGRate), each due at its time on the
        monotonic clock (no drift from timer to timer), as a strap's frames come."""
        pmd = self.dev(address).pmd
        left = [int(frames)]
        if not frames:
            return
        if interval_ms:
            def tick():
                pmd.send_ecg(1)
                left[0] -= 1
                return left[0] > 0
            GLib.timeout_add(max(1, int(interval_ms)), tick)
            return
        start = time.monotonic()
        period = PMD_ECG_PER_FRAME / pmd.ecg_rate

        def due():
            pmd.send_ecg(1)
            left[0] -= 1
            if left[0] > 0:
                k = int(frames) - left[0] + 1
                GLib.timeout_add(max(0, round((start + k * period - time.monotonic()) * 1000)), due)
            return False
        GLib.timeout_add(round(period * 1000), due)

    @dbus.service.method(CONTROL_IFACE, in_signature="su", out_signature="u")
    def SendAcc(self, address, frames):
        """Notifies up to `frames` accelerometer frames of 36 samples if the client started it; returns samples."""
        return self.dev(address).pmd.send_acc(int(frames))

    @dbus.service.method(CONTROL_IFACE, in_signature="sb")
    def SilencePMD(self, address, silent):
        """The strap takes PMD requests but answers none of them (while `silent`)."""
        self.dev(address).pmd.silent = bool(silent)

    @dbus.service.method(CONTROL_IFACE, in_signature="s", out_signature="b")
    def ECGOn(self, address):
        return self.dev(address).pmd.ecg_on

    @dbus.service.method(CONTROL_IFACE, in_signature="say", out_signature="b")
    def NotifyPath(self, path, payload):
        """Notifies any bytes on the characteristic at `path` (garbled frames for the tests)."""
        for d in self.fake.devices:
            for obj in d.gatt:
                if obj.path == path and isinstance(obj, Characteristic):
                    return obj.notify([int(b) for b in payload])
        raise BlueZError("org.hrgateway.FakeBlueZ.Error.NoSuchCharacteristic", "no characteristic " + path)

    @dbus.service.method(CONTROL_IFACE, in_signature="s")
    def ForgetBond(self, address):
        """The strap forgets its bond (reset, paired elsewhere): BlueZ still says Paired, encryption fails."""
        self.dev(address).forgot_bond = True

    @dbus.service.method(CONTROL_IFACE, in_signature="sas")
    def ScriptPair(self, address, outcomes):
        """Outcomes of the next Pair calls: ok, failed:<error name> (AuthenticationFailed, ...)."""
        self.dev(address).pair_outcomes += [str(o) for o in outcomes]

    @dbus.service.method(CONTROL_IFACE, in_signature="sb")
    def SetAdvertising(self, address, advertising):
        d = self.dev(address)
        d.advertising = bool(advertising)
        if advertising and d.adapter.props[ADAPTER]["Discovering"] and d.adapter.wanted(d):
            d.appear()
            d.set(DEVICE, RSSI=dbus.Int16(-58))

    @dbus.service.method(CONTROL_IFACE, in_signature="sas")
    def ScriptConnect(self, address, outcomes):
        """Outcomes of the next Connect calls: ok, abort, inprogress, hang, noresolve, nogatt, failed:<message>."""
        self.dev(address).connect_outcomes += [str(o) for o in outcomes]

    @dbus.service.method(CONTROL_IFACE, in_signature="sas")
    def ScriptStartNotify(self, address, outcomes):
        """Outcomes of the next StartNotify calls on 2A37: ok, inprogress (armed anyway)."""
        self.dev(address).hrm.start_notify_outcomes += [str(o) for o in outcomes]

    @dbus.service.method(CONTROL_IFACE, in_signature="sas")
    def ScriptStartDiscovery(self, adapter, outcomes):
        """Outcomes of the next StartDiscovery calls on adapter: ok, inprogress, stale (accepted, scans nothing)."""
        self.adapter(adapter).start_discovery_outcomes += [str(o) for o in outcomes]

    @dbus.service.method(CONTROL_IFACE, in_signature="sb")
    def SetPendingForeignConnect(self, address, pending):
        """A Connect left pending by another (crashed) client: Connect returns InProgress until Disconnect."""
        self.dev(address).pending_other_connect = bool(pending)

    @dbus.service.method(CONTROL_IFACE, in_signature="su", out_signature="u")
    def SendPackets(self, address, count):
        """Notifies the next `count` 1 Hz packets built from the strap's RR list; returns how many went out."""
        d = self.dev(address)
        sent = 0
        for p in d.next_packets(count):
            if d.hrm.notify(p):
                sent += 1
        return sent

    @dbus.service.method(CONTROL_IFACE, in_signature="suu")
    def StreamPackets(self, address, count, interval_ms):
        """Notifies the next `count` packets, one every `interval_ms` ms from the main loop (returns at once)."""
        d = self.dev(address)
        left = [int(count)]

        def tick():
            for p in d.next_packets(1):
                d.hrm.notify(p)
            left[0] -= 1
            return left[0] > 0
        if count:
            GLib.timeout_add(max(1, int(interval_ms)), tick)

    @dbus.service.method(CONTROL_IFACE, out_signature="at")
    def SentTimes(self):
        """CLOCK_MONOTONIC (ns) of each notification sent since the last call, in order; clears the list."""
        out, self.fake.sent_at = self.fake.sent_at, []
        return dbus.Array([dbus.UInt64(t) for t in out], signature="t")

    @dbus.service.method(CONTROL_IFACE, in_signature="say", out_signature="b")
    def Notify(self, address, payload):
        return self.dev(address).hrm.notify([int(b) for b in payload])

    @dbus.service.method(CONTROL_IFACE, in_signature="s", out_signature="u")
    def PacketsLeft(self, address):
        d = self.dev(address)
        return len(d.packets) - d.packet_index

    @dbus.service.method(CONTROL_IFACE, in_signature="s")
    def LinkLoss(self, address):
        self.dev(address).link_loss()

    @dbus.service.method(CONTROL_IFACE, in_signature="s")
    def StallLink(self, address):
        """The link dies but BlueZ keeps it Connected (before its supervision timeout, or longer): packets sent
        meanwhile are lost. Ends with the link (Disconnect or LinkLoss); the next connection delivers again."""
        d = self.dev(address)
        if not d.connected:
            raise BlueZError("org.hrgateway.FakeBlueZ.Error.NotConnected", "strap %s is not connected" % address)
        d.stalled = True

    @dbus.service.method(CONTROL_IFACE, in_signature="s")
    def RemoveStrap(self, address):
        self.dev(address).remove()

    @dbus.service.method(CONTROL_IFACE, in_signature="s")
    def ExpireStrap(self, address):
        """BlueZ dropped the temporary device and the client missed it: no signal, calls fail with UnknownObject."""
        d = self.dev(address)
        d.present = False
        d.removed = True
        d.connected = False

    @dbus.service.method(CONTROL_IFACE, in_signature="sy")
    def SetBattery(self, address, percent):
        d = self.dev(address)
        d.battery_char.value = [int(percent)]
        if d.battery1:
            d.set(BATTERY, Percentage=dbus.Byte(percent))

    @dbus.service.method(CONTROL_IFACE)
    def RestartDaemon(self):
        """bluetoothd restart: the name goes away with every object and session, then comes back."""
        self.fake.restart()

    @dbus.service.method(CONTROL_IFACE, in_signature="s", out_signature="b")
    def IsConnected(self, address):
        return self.dev(address).connected

    @dbus.service.method(CONTROL_IFACE, in_signature="s", out_signature="u")
    def NotifySessions(self, address):
        return len(self.dev(address).hrm.sessions)

    @dbus.service.method(CONTROL_IFACE, out_signature="as")
    def Calls(self):
        """Every BlueZ call so far as `Method path`, in order."""
        return dbus.Array(["%s %s" % (m, p) for (m, p, _, _) in self.fake.calls], signature="s")

    @dbus.service.method(CONTROL_IFACE, out_signature="aa{sv}")
    def DiscoveryFilters(self):
        return dbus.Array([dbus.Dictionary(a, signature="sv") for (m, _, _, a) in self.fake.calls
                           if m == "SetDiscoveryFilter"], signature="a{sv}")

    @dbus.service.method(CONTROL_IFACE, out_signature="a{sv}")
    def Registrations(self):
        """What the emulator registered: counts of apps and ads, plus the advertisement's properties."""
        out = {"apps": dbus.UInt32(sum(len(a.registered_apps) for a in self.fake.adapters)),
               "ads": dbus.UInt32(sum(len(a.registered_ads) for a in self.fake.adapters))}
        for a in self.fake.adapters:
            for (sender, path), props in a.registered_ads.items():
                out["ad_local_name"] = props.get("LocalName", dbus.String(""))
                out["ad_uuids"] = props.get("ServiceUUIDs", dbus.Array([], signature="s"))
            for (sender, path), objects in a.registered_apps.items():
                out["app_sender"] = dbus.String(sender)
                for opath, ifaces in objects.items():
                    if CHAR in ifaces and ifaces[CHAR].get("UUID") == uuid16(0x2A37):
                        out["hrm_path"] = dbus.ObjectPath(opath)
        return dbus.Dictionary(out, signature="sv")


class Fake:
    def __init__(self, bus):
        self.bus = bus
        self.adapters = []
        self.devices = []
        self.calls = []
        self.sent_at = []
        self.watched = set()
        self.owns_bluez = False
        self.root = None
        self.agents = {}
        self.bluez_name = None
        self.control = Control(self)
        self.control_name = dbus.service.BusName(CONTROL_NAME, bus)

    def record(self, method, path, sender=None, arg=None):
        self.calls.append((method, path, sender, arg))

    def all_objects(self):
        for a in self.adapters:
            yield a
        for d in self.devices:
            yield d
            if d.gatt_exported:
                yield from d.gatt

    def devices_of(self, adapter):
        return [d for d in self.devices if d.adapter is adapter]

    def visible(self, obj):
        if not self.owns_bluez:
            return False
        if isinstance(obj, Device):
            return obj.present
        if isinstance(obj, Adapter):
            return True
        owner = getattr(obj, "device", None) or next((d for d in self.devices if obj in d.gatt), None)
        return owner is not None and owner.present and owner.gatt_exported

    def interfaces_added(self, obj):
        if self.owns_bluez and self.root and self.visible(obj):
            self.root.InterfacesAdded(dbus.ObjectPath(obj.path), dbus.Dictionary(
                {i: dbus.Dictionary(p, signature="sv") for i, p in obj.props.items()}, signature="sa{sv}"))

    def interfaces_removed(self, obj):
        if self.owns_bluez and self.root and self.visible(obj):
            self.root.InterfacesRemoved(dbus.ObjectPath(obj.path), dbus.Array(list(obj.props.keys()), signature="s"))

    def watch_sender(self, sender):
        if sender and sender not in self.watched:
            self.watched.add(sender)
            self.bus.watch_name_owner(sender, lambda owner, s=sender: owner == "" and self.sender_gone(s))

    def sender_gone(self, sender):
        """A client left the bus: its discovery and notify sessions end with it."""
        for a in self.adapters:
            if sender in a.discovering_clients:
                a.drop_client(sender)
        for d in self.devices:
            if sender in d.hrm.sessions:
                d.hrm.sessions.discard(sender)
                if not d.hrm.sessions and d.hrm.props[CHAR]["Notifying"]:
                    d.hrm.set(CHAR, Notifying=dbus.Boolean(False))

    def own_bluez(self):
        self.root = Root(self)
        self.agent_manager = AgentManager(self)
        for a in self.adapters:
            a.export()
        self.owns_bluez = True
        self.bluez_name = dbus.service.BusName(BLUEZ, self.bus, do_not_queue=True)

    def restart(self):
        # Drop the name and every object, as a dying bluetoothd does (no InterfacesRemoved).
        self.owns_bluez = False
        self.bus.release_name(BLUEZ)
        self.bluez_name = None
        for obj in list(self.all_objects()):
            obj.unexport()
        for d in self.devices:
            d.unexport()
            for g in d.gatt:
                g.unexport()
                if isinstance(g, Characteristic):
                    g.sessions.clear()
                    g.props[CHAR]["Notifying"] = dbus.Boolean(False)
                    g.props[CHAR]["Value"] = byte_array([])
            d.connected = False
            d.stalled = False
            d.present = False
            d.removed = False
            d.gatt_exported = False
            d.props[DEVICE]["Connected"] = dbus.Boolean(False)
            d.props[DEVICE]["ServicesResolved"] = dbus.Boolean(False)
        for a in self.adapters:
            a.discovering_clients.clear()
            a.filters.clear()
            a.props[ADAPTER]["Discovering"] = dbus.Boolean(False)
            a.registered_apps.clear()     # a new bluetoothd knows no application or advertisement
            a.registered_ads.clear()
        self.root.remove_from_connection()
        self.root = None
        self.agent_manager.remove_from_connection()
        self.agents.clear()
        GLib.idle_add(lambda: self.own_bluez() and False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True, help="bus address (dbus-daemon --print-address)")
    parser.add_argument("--adapter", action="append", default=[],
                        help="adapter to create at start, NAME=ADDRESS (repeatable; `none` for no adapter); default hci0")
    args = parser.parse_args()

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.address)
    fake = Fake(bus)
    for spec in args.adapter or ["hci0=00:AA:01:00:00:01"]:
        if spec == "none":
            continue
        name, _, address = spec.partition("=")
        fake.adapters.append(Adapter(fake, name, address or "00:AA:01:00:00:01"))
    fake.own_bluez()
    bus.add_signal_receiver(lambda *a: None, "NameAcquired")
    print("READY", flush=True)
    loop = GLib.MainLoop()
    bus.call_on_disconnection(lambda _c: loop.quit())
    loop.run()


if __name__ == "__main__":
    main()
