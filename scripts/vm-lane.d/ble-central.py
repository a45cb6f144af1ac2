#!/usr/bin/python3 -u
"""BLE central over BlueZ D-Bus, for checks in the VM lane.

ble-central.py --adapter hci1 [--uuid 180d] [--address AA:BB:..] [--notifications N] [--timeout S]

Discovers (LE, filtered on the service UUID) until a device advertising the UUID (and having the address, if given)
appears on the adapter, prints
"found <object path> <name>", and exits 0. With --notifications N it then connects, waits for ServicesResolved,
calls StartNotify on the Heart Rate Measurement characteristic 0x2A37 (found by UUID) and exits 0 after N
notifications, printing each value in hex; it disconnects before exiting (a second simultaneous LE connection from
the same btvirt central stalls: see docs/vm-lane.md). Exits 1 on failure or timeout.
"""
import argparse
import sys
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

BASE = "-0000-1000-8000-00805f9b34fb"
HR_MEASUREMENT = "00002a37" + BASE


def full_uuid(short):
    return short.lower() if len(short) > 8 else ("%08x" % int(short, 16)) + BASE


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--uuid", default="180d")
    ap.add_argument("--address", default="")
    ap.add_argument("--notifications", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--stay-connected", action="store_true", help="do not disconnect before exiting")
    args = ap.parse_args()
    want = full_uuid(args.uuid)
    apath = "/org/bluez/" + args.adapter
    t0 = time.monotonic()

    def log(*a):
        print("[ble-central %5.2f]" % (time.monotonic() - t0), *a, flush=True)

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    loop = GLib.MainLoop()
    om = dbus.Interface(bus.get_object("org.bluez", "/"), "org.freedesktop.DBus.ObjectManager")
    adapter = bus.get_object("org.bluez", apath)
    dbus.Interface(adapter, "org.freedesktop.DBus.Properties").Set(
        "org.bluez.Adapter1", "Powered", dbus.Boolean(True))
    st = {"dev": None, "chr": None, "n": 0, "rc": 1}

    def finish(rc, msg):
        log(msg)
        st["rc"] = rc
        if args.notifications > 0 and st["dev"] and not args.stay_connected:
            try:
                bus.get_object("org.bluez", st["dev"]).Disconnect(dbus_interface="org.bluez.Device1", timeout=30)
                log("disconnected")
            except dbus.DBusException as e:
                log("Disconnect:", e)
        loop.quit()

    def on_value(iface, changed, invalidated, path=None):
        if iface == "org.bluez.GattCharacteristic1" and "Value" in changed and path == st["chr"]:
            st["n"] += 1
            log("notification %d value=%s" % (st["n"], bytes(changed["Value"]).hex()))
            if st["n"] >= args.notifications:
                finish(0, "received %d notifications" % st["n"])

    def services_resolved():
        for p, ifs in om.GetManagedObjects().items():
            c = ifs.get("org.bluez.GattCharacteristic1")
            if c and str(p).startswith(st["dev"] + "/") and str(c["UUID"]).lower() == HR_MEASUREMENT:
                st["chr"] = str(p)
        if not st["chr"]:
            return finish(1, "FAIL: no 0x2A37 characteristic")
        log("StartNotify", st["chr"])
        dbus.Interface(bus.get_object("org.bluez", st["chr"]), "org.bluez.GattCharacteristic1").StartNotify(
            reply_handler=lambda: None, error_handler=lambda e: finish(1, "FAIL: StartNotify %s" % e))

    def on_props(iface, changed, invalidated, path=None):
        if iface != "org.bluez.Device1" or not path:
            return
        if path == st["dev"] and changed.get("ServicesResolved") and not st["chr"]:
            services_resolved()
        elif not st["dev"] and "UUIDs" in changed:
            consider(path, {"UUIDs": changed["UUIDs"]})

    def consider(path, dev):
        prefix = apath + "/dev_" + args.address.upper().replace(":", "_")
        if st["dev"] or not path.startswith(prefix):
            return
        uuids = [str(u).lower() for u in dev.get("UUIDs", [])]
        if want not in uuids:
            return
        st["dev"] = path
        name = bus.get_object("org.bluez", path).Get(
            "org.bluez.Device1", "Alias", dbus_interface="org.freedesktop.DBus.Properties")
        print("found %s %s" % (path, name), flush=True)
        try:
            dbus.Interface(adapter, "org.bluez.Adapter1").StopDiscovery()
        except dbus.DBusException as e:
            log("StopDiscovery:", e)
        if args.notifications == 0:
            return finish(0, "discovered")
        dbus.Interface(bus.get_object("org.bluez", path), "org.bluez.Device1").Connect(
            reply_handler=lambda: log("connected"), error_handler=lambda e: finish(1, "FAIL: Connect %s" % e),
            timeout=60)

    bus.add_signal_receiver(on_value, "PropertiesChanged", "org.freedesktop.DBus.Properties", path_keyword="path")
    bus.add_signal_receiver(on_props, "PropertiesChanged", "org.freedesktop.DBus.Properties", path_keyword="path")
    bus.add_signal_receiver(lambda p, i: consider(str(p), i.get("org.bluez.Device1", {})) if "org.bluez.Device1" in i
                            else None, "InterfacesAdded", "org.freedesktop.DBus.ObjectManager")
    ad = dbus.Interface(adapter, "org.bluez.Adapter1")
    ad.SetDiscoveryFilter({"Transport": "le", "UUIDs": [want], "DuplicateData": False})
    ad.StartDiscovery()
    log("discovering on", apath, "for", want)
    for p, ifs in om.GetManagedObjects().items():
        if "org.bluez.Device1" in ifs:
            consider(str(p), ifs["org.bluez.Device1"])
    GLib.timeout_add(int(args.timeout * 1000), lambda: finish(1, "FAIL: timeout after %g s" % args.timeout))
    if st["rc"] == 1 and not (args.notifications == 0 and st["dev"]):
        loop.run()
    return st["rc"]


if __name__ == "__main__":
    sys.exit(main())
