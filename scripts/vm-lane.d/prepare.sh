# shellcheck shell=bash
# Preparation of the VM lane cache. Sourced by scripts/vm-lane; every step is idempotent and skipped when its
# result is already in the cache. Needs root (apt-get) on a Debian 12 (bookworm) amd64 host.
#
# Cache layout (see docs/vm-lane.md):
#   $CACHE/debs/                         .debs fetched with `apt-get download` (never installed)
#   $CACHE/kernel                        the guest kernel ABI name in use, e.g. 6.1.0-56-amd64
#   $CACHE/$K/kroot/boot/vmlinuz-$K      Debian's kernel image, extracted with dpkg -x
#   $CACHE/$K/kroot/lib/modules/$K/      its modules, plus updates/v4l2loopback.ko built here
#   $CACHE/$K/src/                       extracted headers, kbuild and v4l2loopback-dkms source
#   $CACHE/$K/initrd.gz                  busybox initramfs (virtio, 9p, overlay)
#   $CACHE/peripheral/                   BlueZ example peripheral scripts, pinned to one adapter
#   $CACHE/clips/testsrc-320x240-15fps.mp4   default clip for the loopback camera
#   $CACHE/runs/<id>/                    one directory per guest run (shared into the guest as /out)

# Host packages the lane needs. The guest runs the host's own userland (the host root is its lower layer), so
# everything used inside the guest is installed on the host.
VM_LANE_HOST_PACKAGES=(
    qemu-system-x86      # qemu-system-x86_64, TCG
    busybox-static       # initramfs userland
    cpio                 # initramfs archive
    kmod                 # modprobe, depmod (host: depmod -b; guest: modprobe)
    dbus-daemon          # guest system bus
    systemd              # busctl (readiness checks)
    bluez                # bluetoothd, btmgmt, bluetoothctl
    bluez-test-tools     # btvirt
    bluez-test-scripts   # example-gatt-server / example-advertisement (default peripheral)
    python3-dbus python3-gi   # the example peripheral and the smoke test's BLE central
    v4l-utils            # v4l2-ctl
    ffmpeg               # feeds v4l2loopback; makes the default clip
    gcc make bc libelf1  # building v4l2loopback against the extracted headers
)

VM_LANE_APT=(apt-get -o DPkg::Lock::Timeout=300)

vm_lane_log() { printf 'vm-lane: %s\n' "$*" >&2; }
vm_lane_die() { printf 'vm-lane: error: %s\n' "$*" >&2; exit 2; }

# Installs the host packages that are missing (no apt call at all when every one is installed).
vm_lane_prepare_host_packages() {
    local missing=() p
    for p in "${VM_LANE_HOST_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || vm_lane_die "missing host packages (${missing[*]}); run as root or install them"
    vm_lane_log "installing host packages: ${missing[*]}"
    if ! "${VM_LANE_APT[@]}" install -y --no-install-recommends "${missing[@]}" >&2; then
        vm_lane_log "install failed; refreshing the package lists and retrying"
        "${VM_LANE_APT[@]}" update >&2 || true
        "${VM_LANE_APT[@]}" install -y --no-install-recommends "${missing[@]}" >&2 ||
            vm_lane_die "apt-get install ${missing[*]} failed"
    fi
}

# Sets K (kernel ABI name, e.g. 6.1.0-56-amd64). Order: $VM_LANE_KERNEL, the one already in the cache, the one
# Debian's linux-image-amd64 depends on now.
vm_lane_resolve_kernel() {
    if [ -n "${VM_LANE_KERNEL:-}" ]; then
        K=$VM_LANE_KERNEL
    elif [ -s "$CACHE/kernel" ] && [ -f "$CACHE/$(cat "$CACHE/kernel")/ready" ]; then
        K=$(cat "$CACHE/kernel")
    else
        K=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -n1)
        if [ -z "$K" ]; then
            "${VM_LANE_APT[@]}" update >&2 || true
            K=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -n1)
        fi
        [ -n "$K" ] || vm_lane_die "cannot resolve the Debian kernel (apt-cache depends linux-image-amd64); set VM_LANE_KERNEL"
    fi
    case $K in *[!A-Za-z0-9.+-]*) vm_lane_die "bad kernel name '$K'";; esac
}

# Prints the .ko paths (relative to the modules directory) needed by the given modules, dependencies first.
vm_lane_module_order() {
    local md=$1; shift
    declare -A seen=()
    _visit() {
        local p=$1 d
        [ -n "${seen[$p]:-}" ] && return 0
        seen[$p]=1
        for d in $(grep -E "^${p//./\\.}:" "$md/modules.dep" | cut -d: -f2 | tr ' ' '\n' | tac); do _visit "$d"; done
        echo "$p"
    }
    local m p
    for m in "$@"; do
        p=$(grep -E "(^|/)$m\.ko(\.xz)?:" "$md/modules.dep" | cut -d: -f1)
        # Built into the kernel (virtio_pci is, from 6.12): nothing to load.
        [ -z "$p" ] && grep -qE "(^|/)$m\.ko$" "$md/modules.builtin" 2>/dev/null && continue
        [ -n "$p" ] || vm_lane_die "module $m not in $md/modules.dep"
        _visit "$p"
    done
}

vm_lane_prepare_kernel() {
    local kdir=$CACHE/$K kver kbuild mm
    if [ -f "$kdir/ready" ] && [ "$kdir/initrd.gz" -nt "$VM_LANE_DIR/initramfs-init" ]; then
        echo "$K" > "$CACHE/kernel"
        return 0
    fi
    mkdir -p "$CACHE/debs" "$kdir"
    mm=$(echo "$K" | cut -d. -f1,2)                    # 6.1
    kbuild=linux-kbuild-$mm
    # The 6.12 kernels in bookworm name their kbuild after the whole version (linux-kbuild-6.12.117+deb12).
    case $K in *+*) kbuild=linux-kbuild-${K%-amd64} ;; esac
    if [ ! -f "$kdir/kroot/boot/vmlinuz-$K" ] || [ ! -f "$kdir/kroot/lib/modules/$K/updates/v4l2loopback.ko" ]; then
        # The headers must be the same Debian version as the image. kbuild (host tools, no kernel ABI) is that
        # version too when Debian still has it; it is sometimes rebuilt alone (6.1.192-3 beside an image 6.1.192-2),
        # and then the kbuild of the same upstream version is taken.
        kver=$(apt-cache show "linux-image-$K" 2>/dev/null | sed -n 's/^Version: //p' | head -n1)
        [ -n "$kver" ] || vm_lane_die "linux-image-$K is not in the package lists (apt-get update, or set VM_LANE_KERNEL)"
        local kbuilds kbver=$kver
        kbuilds=$(apt-cache madison "$kbuild" 2>/dev/null | awk -F'|' '{gsub(/ /, "", $2); print $2}')
        if ! grep -qxF "$kver" <<< "$kbuilds"; then
            kbver=$(grep -F "${kver%-*}-" <<< "$kbuilds" | head -n1)
            [ -n "$kbver" ] || vm_lane_die "no $kbuild of version ${kver%-*} for linux-image-$K $kver (set VM_LANE_KERNEL)"
        fi
        local want=("linux-image-$K=$kver" "linux-headers-$K=$kver" "linux-headers-${K%-amd64}-common=$kver"
                    "$kbuild=$kbver" v4l2loopback-dkms) w have=1
        for w in "${want[@]}"; do
            ls "$CACHE/debs/${w%%=*}_"*.deb > /dev/null 2>&1 || have=0
        done
        if [ $have = 0 ]; then
            vm_lane_log "downloading the guest kernel $K ($kver), its headers and v4l2loopback-dkms"
            (cd "$CACHE/debs" && "${VM_LANE_APT[@]}" download "${want[@]}" >&2) || vm_lane_die "apt-get download failed"
        fi
        vm_lane_log "extracting the kernel"
        rm -rf "$kdir/kroot" "$kdir/src"
        dpkg -x "$CACHE/debs/linux-image-${K}_"*.deb "$kdir/kroot"
        mkdir -p "$kdir/src"
        local d
        for d in "$CACHE/debs/linux-headers-${K}_"*.deb "$CACHE/debs/linux-headers-${K%-amd64}-common_"*.deb \
                 "$CACHE/debs/${kbuild}_"*.deb "$CACHE/debs/v4l2loopback-dkms_"*.deb; do
            dpkg -x "$d" "$kdir/src"
        done
        # Debian's split headers include the common half by absolute path; point it into the extracted tree.
        sed -i "s#^include /usr/src/#include $kdir/src/usr/src/#" "$kdir/src/usr/src/linux-headers-$K/Makefile"
        vm_lane_log "building v4l2loopback against linux-headers-$K"
        rm -rf "$kdir/v4l2loopback"
        cp -r "$kdir/src/usr/src/"v4l2loopback-* "$kdir/v4l2loopback"
        # bookworm's v4l2loopback (0.12.7) predates 6.8, which dropped strlcpy; BTF would need pahole.
        local extra=()
        case $K in 6.1.*) ;; *) extra=(KCFLAGS=-Dstrlcpy=strscpy CONFIG_DEBUG_INFO_BTF_MODULES=) ;; esac
        nice -n "$NICE" make -s -j2 -C "$kdir/src/usr/src/linux-headers-$K" M="$kdir/v4l2loopback" "${extra[@]}" modules >&2 ||
            vm_lane_die "v4l2loopback build failed"
        mkdir -p "$kdir/kroot/lib/modules/$K/updates"
        cp "$kdir/v4l2loopback/v4l2loopback.ko" "$kdir/kroot/lib/modules/$K/updates/"
        depmod -b "$kdir/kroot" "$K"
    fi
    vm_lane_prepare_initrd "$kdir"
    date -u +%FT%TZ > "$kdir/ready"
    echo "$K" > "$CACHE/kernel"
}

# busybox-static + the virtio/9p/overlay modules (all =m in Debian's kernel, virtio included) + our /init.
vm_lane_prepare_initrd() {
    local kdir=$1 md ir f bb
    md=$kdir/kroot/lib/modules/$K
    ir=$kdir/initramfs
    bb=$(command -v busybox) || vm_lane_die "busybox not found"
    ldd "$bb" > /dev/null 2>&1 && vm_lane_die "$bb is dynamically linked; install busybox-static"
    rm -rf "$ir"
    mkdir -p "$ir"/{bin,dev,proc,sys,mods,host,rw,newroot}
    cp "$bb" "$ir/bin/busybox"
    : > "$ir/mods/order"
    for f in $(vm_lane_module_order "$md" virtio_pci 9pnet_virtio 9p overlay); do
        cp "$md/$f" "$ir/mods/"
        basename "$f" >> "$ir/mods/order"
    done
    cp "$VM_LANE_DIR/initramfs-init" "$ir/init"
    chmod 755 "$ir/init"
    (cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1) > "$kdir/initrd.gz.tmp"
    mv "$kdir/initrd.gz.tmp" "$kdir/initrd.gz"
    rm -rf "$ir"
}

# BlueZ's example peripheral scripts take "the first adapter with GattManager1", which is hci0 or hci1 at random:
# pin them to $HCI.
vm_lane_prepare_peripheral() {
    local e=/usr/share/doc/bluez-test-scripts/examples f
    [ -f "$CACHE/peripheral/example-advertisement.py" ] && [ -f "$CACHE/peripheral/example-gatt-server.py" ] && return 0
    mkdir -p "$CACHE/peripheral"
    for f in example-gatt-server example-advertisement; do
        grep -q 'adapter = find_adapter(bus)' "$e/$f" || vm_lane_die "$e/$f: no 'adapter = find_adapter(bus)' to pin"
        sed 's#adapter = find_adapter(bus)#adapter = "/org/bluez/" + __import__("os").environ["HCI"]#' "$e/$f" \
            > "$CACHE/peripheral/$f.py"
    done
}

vm_lane_prepare_clip() {
    local clip=$CACHE/clips/testsrc-320x240-15fps.mp4
    [ -f "$clip" ] && return 0
    mkdir -p "$CACHE/clips"
    nice -n "$NICE" ffmpeg -hide_banner -loglevel error -nostdin -y -f lavfi -i testsrc=size=320x240:rate=15 -t 20 \
        -pix_fmt yuv420p -c:v libx264 -preset ultrafast "$clip.tmp.mp4" || vm_lane_die "making the default clip failed"
    mv "$clip.tmp.mp4" "$clip"
}

vm_lane_prepare() {
    local t0=$SECONDS
    vm_lane_prepare_host_packages
    vm_lane_resolve_kernel
    vm_lane_prepare_kernel
    vm_lane_prepare_peripheral
    vm_lane_prepare_clip
    vm_lane_log "prepared (kernel $K) in $((SECONDS - t0)) s; cache $CACHE"
}
