# A tiny Linux guest for the vhost-user-blk tests, sourced by scripts/guest-*.sh.
#
# guest_prepare   installs QEMU, busybox and fio if missing (apt-get), unpacks Debian's
#                 cloud kernel (apt-get download + dpkg -x, nothing installed) and builds the
#                 base initramfs: busybox, the virtio modules, fio with its libraries, an init.
#                 Set before it, for a guest of another shape (each in a GUEST_DIR of its own):
#                 GUEST_KERNEL_INDEX="MIRROR SUITE" takes the newest cloud kernel of that
#                 Debian suite's package index instead of apt's (e.g. an older release);
#                 GUEST_EXTRA_MODULES adds modules and every module they depend on, listed
#                 in load order in /lib/modules/extra.order (the job loads them);
#                 GUEST_EXTRA_FILES adds host files at their own paths, programs with the
#                 libraries they load.
# guest_accel     KVM if a probe boot succeeds within 20 s, else TCG (cached; says which).
# guest_boot      boots the guest once with a job script and collects its console;
#                 GUEST_BOOT_FILES adds host files at their own paths to this boot only
#                 (files that change from run to run, which a cached initramfs would keep).
#
# The guest's /init loads virtio_ring .. virtio_blk, runs /job (appended to the base
# initramfs as a second cpio archive per boot, which the kernel unpacks over the first) and
# powers off. The job prints what it wants returned between lines "@@BEGIN NAME" and
# "@@END NAME" on the serial console; guest_result NAME extracts one.

GUEST_DIR=${MQBLK_GUEST_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/guest}
# What the init loads, with every module these depend on, dependencies first: virtio_ring
# and virtio, and in newer kernels than 5.10 (6.1 here) virtio_pci_modern_dev and
# virtio_pci_legacy_dev as well.
GUEST_MODULES="virtio_pci virtio_blk"

guest_log() { echo "guest: $*" >&2; }

# Several tests may prepare at once (cargo runs a binary's tests in parallel): one at a time
# holds $GUEST_DIR/.lock while installing, downloading and building; the others then find
# everything done.
guest_prepare() {
    mkdir -p "$GUEST_DIR" || return 1
    # Absolute: the initramfs is written from inside its own tree.
    GUEST_DIR=$(cd "$GUEST_DIR" && pwd)
    local rc
    {
        flock 9
        guest_prepare_locked
        rc=$?
    } 9>"$GUEST_DIR/.lock"
    return $rc
}

# Installs the Debian package of each host program missing: guest_host_tools PROG:PACKAGE...
guest_host_tools() {
    local need="" t
    for t in "$@"; do
        command -v "${t%%:*}" >/dev/null 2>&1 || need="$need ${t##*:}"
    done
    [ -z "$need" ] && return 0
    guest_log "installing$need"
    apt-get update -q >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >/dev/null ||
        { guest_log "could not install$need"; return 1; }
}

guest_prepare_locked() {
    guest_host_tools qemu-system-x86_64:qemu-system-x86 busybox:busybox-static fio:fio || return 1
    if ! command -v modinfo >/dev/null 2>&1 && ! [ -x /sbin/modinfo ]; then
        guest_log "installing kmod"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q kmod >/dev/null ||
            { guest_log "could not install kmod"; return 1; }
    fi
    if [ -n "${GUEST_KERNEL_INDEX:-}" ] && ! ls "$GUEST_DIR"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
        local url
        url=$(guest_kernel_from_index $GUEST_KERNEL_INDEX) || return 1
        guest_log "unpacking ${url##*/}"
        rm -rf "$GUEST_DIR/deb" "$GUEST_DIR/kernel" "$GUEST_DIR/base.cpio"
        mkdir -p "$GUEST_DIR/deb"
        curl -fsS -o "$GUEST_DIR/deb/k.deb" "$url" || { guest_log "could not download $url"; return 1; }
        dpkg -x "$GUEST_DIR/deb/k.deb" "$GUEST_DIR/kernel"
        rm -rf "$GUEST_DIR/deb"
    fi
    if ! ls "$GUEST_DIR"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
        local pkg
        pkg=$(apt-cache search --names-only '^linux-image-[0-9.]+-[0-9]+-cloud-amd64$' |
            awk '{print $1}' | sort -V | tail -1)
        if [ -z "$pkg" ]; then
            apt-get update -q >/dev/null 2>&1 || true
            pkg=$(apt-cache search --names-only '^linux-image-[0-9.]+-[0-9]+-cloud-amd64$' |
                awk '{print $1}' | sort -V | tail -1)
        fi
        [ -n "$pkg" ] || { guest_log "no linux-image-*-cloud-amd64 package found"; return 1; }
        guest_log "unpacking $pkg"
        rm -rf "$GUEST_DIR/deb" "$GUEST_DIR/kernel"
        mkdir -p "$GUEST_DIR/deb"
        (cd "$GUEST_DIR/deb" && apt-get download "$pkg" >/dev/null 2>&1) ||
            { guest_log "apt-get download $pkg failed"; return 1; }
        dpkg -x "$GUEST_DIR"/deb/*.deb "$GUEST_DIR/kernel"
        rm -rf "$GUEST_DIR/deb" "$GUEST_DIR/base.cpio"
    fi
    GUEST_KERNEL=$(ls "$GUEST_DIR"/kernel/boot/vmlinuz-* | head -1)
    # The initramfs is kept while it holds what is asked of it now (the same modules and
    # files); anything else rebuilds it.
    local want="$GUEST_MODULES | ${GUEST_EXTRA_MODULES:-} | ${GUEST_EXTRA_FILES:-}"
    if [ -s "$GUEST_DIR/base.cpio" ] && [ "$(cat "$GUEST_DIR/base.want" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    guest_log "building the initramfs"
    local root="$GUEST_DIR/root" f
    rm -rf "$root"
    mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,lib/modules,etc}
    cp "$(command -v busybox)" "$root/bin/busybox"
    local base
    base=$(guest_add_modules "$root" $GUEST_MODULES) || return 1
    if [ -n "${GUEST_EXTRA_MODULES:-}" ]; then
        guest_add_modules "$root" $GUEST_EXTRA_MODULES >"$root/lib/modules/extra.order" || return 1
    fi
    # fio and every library it loads, at the paths the loader looks for them.
    cp "$(command -v fio)" "$root/bin/fio"
    guest_copy_libs "$(command -v fio)" "$root"
    for f in ${GUEST_EXTRA_FILES:-}; do
        [ -e "$f" ] || { guest_log "$f: no such file on the host"; return 1; }
        mkdir -p "$root$(dirname "$f")"
        cp -L "$f" "$root$f"
        [ -x "$f" ] && guest_copy_libs "$f" "$root"
    done
    cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $base; do insmod /lib/modules/\$m.ko; done
i=0
while [ ! -b /dev/vda ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
echo "@@BOOTED"
sh /job 2>&1
echo "@@DONE"
sync
poweroff -f
EOF
    chmod +x "$root/init"
    (cd "$root" && find . | busybox cpio -o -H newc >"$GUEST_DIR/base.cpio" 2>/dev/null)
    echo "$want" >"$GUEST_DIR/base.want"
    rm -rf "$root"
}

# Module file $1 (compressed or not) as a plain .ko at $2, which busybox's insmod loads.
guest_unpack_module() {
    case "$1" in
    *.xz) xz -dc "$1" >"$2" ;;
    *.zst) zstd -dc "$1" >"$2" ;;
    *) cp "$1" "$2" ;;
    esac
}

# Modules $2... and their dependencies into root $1's /lib/modules; prints their load order.
guest_add_modules() {
    local root=$1 order m f
    shift
    order=$(guest_module_order "$@") || return 1
    for m in $order; do
        f=$(find "$GUEST_DIR"/kernel/lib/modules -name "$m.ko*" | head -1)
        guest_unpack_module "$f" "$root/lib/modules/$m.ko"
    done
    echo $order
}

# Every library program $1 loads, copied under root $2 at the paths the loader looks for.
guest_copy_libs() {
    local f
    for f in $(ldd "$1" | grep -o '/[^ ]*'); do
        mkdir -p "$2$(dirname "$f")"
        cp -L "$f" "$2$f"
    done
}

# The named modules of the unpacked kernel and every module they depend on (modinfo's
# `depends`), dependencies first; a module built into the kernel is left out.
guest_module_order() {
    local modinfo seen="" out=""
    modinfo=$(command -v modinfo || echo /sbin/modinfo)
    visit() {
        local m=$1 f d
        case " $seen " in *" $m "*) return 0 ;; esac
        seen="$seen $m"
        f=$(find "$GUEST_DIR"/kernel/lib/modules -name "$m.ko*" | head -1)
        if [ -z "$f" ]; then
            grep -q "/$m.ko" "$GUEST_DIR"/kernel/lib/modules/*/modules.builtin && return 0
            guest_log "module $m not in the kernel package"
            return 1
        fi
        for d in $("$modinfo" -F depends "$f" | tr ',' ' '); do
            visit "$d" || return 1
        done
        out="$out $m"
    }
    for m in "$@"; do visit "$m" || return 1; done
    echo $out
}

# The URL of the newest linux-image-*-cloud-amd64 in Debian suite $2 of mirror $1.
guest_kernel_from_index() {
    local path
    path=$(curl -fsS "$1/dists/$2/main/binary-amd64/Packages.xz" | xz -dc |
        awk '/^Filename: .*\/linux-image-[0-9.]+-[0-9]+-cloud-amd64_/ {print $2}' | sort -V | tail -1)
    [ -n "$path" ] || { guest_log "no cloud kernel in $1 $2"; return 1; }
    echo "$1/$path"
}

# Boots the guest with the job script $1; the console goes to $2. The remaining arguments
# are QEMU's, for the disk (see guest_vhost_args / guest_drive_args).
guest_boot() {
    local job=$1 console=$2
    shift 2
    local d
    d=$(mktemp -d)
    mkdir -p "$d/r"
    cp "$job" "$d/r/job"
    local f
    for f in ${GUEST_BOOT_FILES:-}; do
        [ -e "$f" ] || { guest_log "$f: no such file on the host"; rm -rf "$d"; return 1; }
        mkdir -p "$d/r$(dirname "$f")"
        cp -L "$f" "$d/r$f"
    done
    (cd "$d/r" && find . ! -name . | busybox cpio -o -H newc >"$d/job.cpio" 2>/dev/null)
    cat "$GUEST_DIR/base.cpio" "$d/job.cpio" >"$d/initrd"
    local accel=${GUEST_ACCEL:-tcg} cpu=max
    [ "$accel" = kvm ] && cpu=host
    local rc attempt
    for attempt in 1 2; do
        timeout "${GUEST_TIMEOUT:-600}" qemu-system-x86_64 \
            -accel "$accel" -cpu "$cpu" -smp "${GUEST_CPUS:-2}" -m "${GUEST_MEM:-1G}" \
            -object "memory-backend-memfd,id=mem,size=${GUEST_MEM:-1G},share=on" \
            -numa node,memdev=mem \
            -kernel "$GUEST_KERNEL" -initrd "$d/initrd" \
            -append "console=ttyS0 quiet loglevel=1 panic=-1 ${GUEST_APPEND:-}" \
            -name mqblk-guest,debug-threads=on \
            -display none -monitor none -serial "file:$console" -no-reboot -nodefaults \
            "$@" &
        local q=$!
        # A guest kernel whose CPU locks up (its watchdog's "soft lockup", seen once in
        # some hundred boots under TCG here, in a shell writing to tracefs) never finishes
        # its job: stop it at once rather than at the timeout, and boot it once more.
        while kill -0 "$q" 2>/dev/null; do
            if grep -q 'BUG: soft lockup' "$console" 2>/dev/null; then
                kill "$q" 2>/dev/null
                break
            fi
            sleep 1
        done
        wait "$q"
        rc=$?
        grep -q 'BUG: soft lockup' "$console" 2>/dev/null && [ "$attempt" = 1 ] || break
        guest_log "the guest kernel locked up (soft lockup; console kept as $console.lockup): booting it again"
        # Moved away, so the next boot's console starts empty.
        mv "$console" "$console.lockup"
    done
    rm -rf "$d"
    grep -q '^@@DONE' "$console" || { guest_log "the guest did not finish its job (qemu exit $rc; console $console)"; return 1; }
}

# QEMU arguments for a vhost-user-blk disk served on socket $1 with $2 virtqueues.
guest_vhost_args() {
    echo "-chardev socket,id=vu,path=$1 -device vhost-user-blk-pci,chardev=vu,num-queues=$2"
}

# QEMU arguments for its own virtio-blk over file $1 with $2 virtqueues (io_uring, O_DIRECT
# unless the file system refuses it).
guest_drive_args() {
    echo "-drive file=$1,if=none,id=d0,format=raw,cache=${3:-none},aio=io_uring -device virtio-blk-pci,drive=d0,num-queues=$2"
}

# What the job printed between "@@BEGIN $2" and "@@END $2" on console $1.
guest_result() {
    tr -d '\r' <"$1" | awk -v n="$2" '$0 == "@@BEGIN " n {on=1; next} $0 == "@@END " n {on=0} on'
}

# Picks the accelerator: KVM if the kernel boots under it to its init, else TCG. The probe
# is cached in $GUEST_DIR/accel; MQBLK_GUEST_ACCEL=kvm|tcg skips it.
guest_accel() {
    if [ -n "${MQBLK_GUEST_ACCEL:-}" ]; then
        GUEST_ACCEL=$MQBLK_GUEST_ACCEL
    else
        {
            flock 9
            guest_probe_accel
        } 9>"$GUEST_DIR/.lock"
    fi
    guest_log "accelerator: $GUEST_ACCEL"
    export GUEST_ACCEL
}

# The probe itself, under the preparation lock; its answer is kept in $GUEST_DIR/accel.
guest_probe_accel() {
    if [ -s "$GUEST_DIR/accel" ]; then
        GUEST_ACCEL=$(cat "$GUEST_DIR/accel")
        return
    fi
    GUEST_ACCEL=tcg
    if [ -w /dev/kvm ]; then
        local j c
        j=$(mktemp)
        c=$(mktemp)
        echo 'echo probe' >"$j"
        if GUEST_ACCEL=kvm GUEST_TIMEOUT=20 GUEST_CPUS=1 GUEST_MEM=512M guest_boot "$j" "$c" 2>/dev/null; then
            GUEST_ACCEL=kvm
        fi
        rm -f "$j" "$c"
    fi
    echo "$GUEST_ACCEL" >"$GUEST_DIR/accel"
}

# The start of a script that ends in PASS or FAIL: `fail` prints the first failure and
# exits 1; `$mqblk` is this build's binary ($MQBLK, built if missing); the guest is prepared
# and its accelerator picked.
fail() { echo "FAIL: $*"; exit 1; }
guest_check_setup() {
    mqblk=${MQBLK:-target/release/mqblk}
    [ -x "$mqblk" ] || cargo build --release -q -p mqblk || fail "building mqblk"
    guest_prepare || fail "preparing the guest"
    guest_accel
}
