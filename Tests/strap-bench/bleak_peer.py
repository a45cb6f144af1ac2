"""bleak (Python) as a heart-rate client of the fake bluetoothd, for `hr-gateway-bench strap --peer bleak`.

Connects to one strap of Tests/Fixtures/fake_bluez.py on the bus at --address (through DBUS_SYSTEM_BUS_ADDRESS, which
dbus-fast honours), subscribes to 0x2A37 with StartNotify, has the fake stream --count notifications every
--interval-ms, and prints one JSON line: notification-to-callback latency (the fake's CLOCK_MONOTONIC just before it
emits PropertiesChanged to time.monotonic_ns() at the start of bleak's callback; both CLOCK_MONOTONIC), and this
process's RSS and CPU time per notification while streaming.
"""
import argparse
import asyncio
import json
import os
import resource
import sys
import time


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def cpu_s():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


async def main(args):
    os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = args.address
    from bleak import BleakClient, BleakScanner
    from dbus_fast import BusType, Message, MessageType
    from dbus_fast.aio import MessageBus

    control = await MessageBus(bus_address=args.address, bus_type=BusType.SYSTEM).connect()

    async def ctl(member, signature="", body=()):
        reply = await control.call(Message(
            destination="org.hrgateway.FakeBlueZ", path="/control", interface="org.hrgateway.FakeBlueZ1",
            member=member, signature=signature, body=list(body)))
        if reply.message_type == MessageType.ERROR:
            raise RuntimeError("%s: %s %s" % (member, reply.error_name, reply.body))
        return reply.body

    # bleak reports a device on an advertisement seen while it scans: have the fake advertise (RSSI update) until
    # bleak's scanner has it.
    found = asyncio.Event()
    seen = {}

    def detected(d, _adv):
        if d.address.upper() == args.strap.upper():
            seen["device"] = d
            found.set()
    scanner = BleakScanner(detection_callback=detected)
    await scanner.start()
    for _ in range(40):
        await ctl("SetAdvertising", "sb", (args.strap, True))
        try:
            await asyncio.wait_for(found.wait(), timeout=0.25)
            break
        except asyncio.TimeoutError:
            pass
    await scanner.stop()
    device = seen.get("device")
    if device is None:
        raise RuntimeError("bleak did not find %s" % args.strap)
    received = []
    done = asyncio.Event()
    total = args.warmup + args.count

    def callback(_char, _data):
        received.append(time.monotonic_ns())
        if len(received) >= total:
            done.set()

    async with BleakClient(device) as client:
        await client.start_notify("00002a37-0000-1000-8000-00805f9b34fb", callback, bluez={"use_start_notify": True})
        await ctl("SentTimes")
        await ctl("StreamPackets", "suu", (args.strap, args.warmup, args.interval_ms))
        while len(received) < args.warmup:
            await asyncio.sleep(0.05)
        cpu0, wall0 = cpu_s(), time.monotonic()
        await ctl("StreamPackets", "suu", (args.strap, args.count, args.interval_ms))
        await asyncio.wait_for(done.wait(), timeout=args.count * args.interval_ms / 1000 + 30)
        cpu1, wall1 = cpu_s(), time.monotonic()
        rss = rss_kb()
        sent = (await ctl("SentTimes"))[0]
        await client.stop_notify("00002a37-0000-1000-8000-00805f9b34fb")
    if len(sent) != len(received):
        raise RuntimeError("sent %d notifications, bleak got %d" % (len(sent), len(received)))
    lat = sorted((r - s) / 1000 for s, r in list(zip(sent, received))[args.warmup:])
    print(json.dumps({
        "peer": "bleak", "n": len(lat),
        "p50_us": lat[len(lat) // 2], "p99_us": lat[min(len(lat) - 1, len(lat) * 99 // 100)], "max_us": lat[-1],
        "rss_kb": rss, "cpu_us_per_notification": (cpu1 - cpu0) * 1e6 / args.count,
        "seconds": wall1 - wall0, "latencies_us": lat,
    }), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--address", required=True)
    p.add_argument("--strap", required=True)
    p.add_argument("--count", type=int, default=400)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--interval-ms", type=int, default=25)
    try:
        asyncio.run(main(p.parse_args()))
    except Exception as e:  # one clear line for the benchmark to show
        print(json.dumps({"peer": "bleak", "error": "%s: %s" % (type(e).__name__, e)}), flush=True)
        sys.exit(1)
