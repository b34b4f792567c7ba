#!/bin/bash
# rxe_vm.sh -- the project's copy of the team's run-in-rxe-vm.sh, so a fresh
# clone can run the verbs tests (scripts/verbs_vm.sh drives it).
# Runs a host command/binary inside a throw-away QEMU guest that
# runs Debian's stock kernel (linux-image-amd64) with a soft-RoCE device loaded
# (rdma_rxe, device "rxe0" bound to a dummy netdev "dummy0", IPv4 10.11.12.1/24;
# optionally bound to a virtio NIC instead, see RXE_VM_NET).
#
# Usage:  rxe_vm.sh [--] COMMAND [ARGS...]
#         rxe_vm.sh --accel      prints the accelerator a run would use (kvm|tcg)
#   COMMAND runs as root in the guest, in the same working directory as on the
#   host. The guest's / is an overlay: the host's / (shared read-only over 9p)
#   plus a tmpfs for writes, so host-built binaries and host libraries
#   (libibverbs, librxe provider, ...) are used as-is. Guest writes are
#   discarded, except under $RXE_VM_RW_DIR (if set: a host directory shared
#   read-write at the same path).
#   The script's exit status is COMMAND's exit status; 125 means the VM
#   infrastructure failed (no exit status came back from the guest), 124 means
#   the VM timed out.
#
# Environment knobs (all optional):
#   RXE_VM_DIR=/tmp/rxe-vm   cache dir (kernel, initramfs) and per-run temp dirs
#   RXE_VM_TIMEOUT=600       seconds before the VM is killed
#   RXE_VM_MEM=1024          guest RAM in MiB
#   RXE_VM_SMP=2             guest vCPUs
#   RXE_VM_ACCEL=auto        "kvm", "tcg", or "auto": kvm when /dev/kvm is usable and
#                            the CPU has hardware virtualisation (vmx/svm), else tcg
#                            (with a log line saying why). A kvm guest that dies
#                            before it runs the command is retried once under tcg.
#   RXE_VM_RW_DIR=           host dir to share read-write at the same path
#   RXE_VM_INSTALL=1         apt-get install missing host packages (needs root)
#   RXE_VM_VERBOSE=0         1: show the kernel's boot messages and boot-stage times
#   RXE_VM_PASSENV=          names of host environment variables to export in the guest
#   RXE_VM_IP=10.11.12.1     IPv4 address (/24) of the netdev that rxe0 is bound to
#   RXE_VM_NET=              if set, give the guest a virtio NIC "-netdev $RXE_VM_NET,id=n0"
#                            (e.g. "socket,listen=127.0.0.1:5555" / "socket,connect=127.0.0.1:5555"
#                            to wire two VMs together) and bind rxe0 to it instead of dummy0
set -euo pipefail

RXE_VM_DIR=${RXE_VM_DIR:-/tmp/rxe-vm}
TIMEOUT=${RXE_VM_TIMEOUT:-600}
MEM=${RXE_VM_MEM:-1024}
SMP=${RXE_VM_SMP:-2}
ACCEL=${RXE_VM_ACCEL:-auto}
RW_DIR=${RXE_VM_RW_DIR:-}
IP=${RXE_VM_IP:-10.11.12.1}
NET=${RXE_VM_NET:-}
VERBOSE=${RXE_VM_VERBOSE:-0}

log() { echo "[rxe-vm] $*" >&2; }

# KVM needs /dev/kvm *and* hardware virtualisation: a /dev/kvm backed by a
# software hypervisor (e.g. PVM, whose guests need a PVM-built kernel) cannot
# boot the stock Debian kernel (seen: QEMU aborts on MSR 0x10a with -cpu host,
# or the kernel hangs in early boot), so "auto" requires vmx/svm in cpuinfo.
kvm_usable() {
  [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "no usable /dev/kvm"; return 1; }
  grep -qwE 'vmx|svm' /proc/cpuinfo || { echo "/dev/kvm exists but the CPU shows no vmx/svm (no hardware nested virtualisation)"; return 1; }
  return 0
}
auto_kvm=0
if [ "$ACCEL" = auto ]; then
  if why=$(kvm_usable); then ACCEL=kvm auto_kvm=1
  else ACCEL=tcg; log "accel=tcg (emulation, slow): $why"; fi
fi
if [ "${1:-}" = "--accel" ]; then echo "$ACCEL"; exit 0; fi
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || { echo "usage: $0 [--accel | [--] COMMAND [ARGS...]]" >&2; exit 2; }
die() { echo "[rxe-vm] ERROR: $*" >&2; exit 125; }

# ---------------------------------------------------------------- host tools
need_pkgs=()
command -v qemu-system-x86_64 >/dev/null || need_pkgs+=(qemu-system-x86)
# need a *static* busybox (it runs before any host library is reachable)
{ [ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -x insmod >/dev/null &&
  ! ldd /bin/busybox >/dev/null 2>&1; } || need_pkgs+=(busybox-static)
command -v cpio >/dev/null || need_pkgs+=(cpio)
command -v xz >/dev/null || need_pkgs+=(xz-utils)
command -v rdma >/dev/null || need_pkgs+=(iproute2)
[ -e /etc/libibverbs.d/rxe.driver ] || need_pkgs+=(ibverbs-providers rdma-core)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  [ "${RXE_VM_INSTALL:-1}" = 1 ] || die "missing host packages: ${need_pkgs[*]}"
  log "installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${need_pkgs[@]}" >&2 ||
    { apt-get update >&2 && apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${need_pkgs[@]}" >&2; } ||
    die "apt-get install ${need_pkgs[*]} failed"
fi

mkdir -p "$RXE_VM_DIR"
exec 9>"$RXE_VM_DIR/.lock"          # serialize cache building between runs

# ----------------------------------------------- guest kernel (not installed on host)
flock 9
if [ ! -s "$RXE_VM_DIR/kernel/KVER" ]; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [ -z "$pkg" ]; then apt-get update >&2; pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); fi
  [ -n "$pkg" ] || die "cannot resolve linux-image-amd64"
  log "downloading $pkg"
  rm -rf "$RXE_VM_DIR/debs" "$RXE_VM_DIR/kernel.tmp"; mkdir -p "$RXE_VM_DIR/debs" "$RXE_VM_DIR/kernel.tmp"
  (cd "$RXE_VM_DIR/debs" && apt-get -o APT::Sandbox::User=root download "$pkg" >&2) ||
    { apt-get update >&2 && (cd "$RXE_VM_DIR/debs" && apt-get -o APT::Sandbox::User=root download "$pkg" >&2); } || die "apt-get download $pkg failed"
  dpkg-deb -x "$RXE_VM_DIR"/debs/"$pkg"_*.deb "$RXE_VM_DIR/kernel.tmp"
  kver=$(ls "$RXE_VM_DIR/kernel.tmp/lib/modules")
  cp "$RXE_VM_DIR/kernel.tmp/boot/vmlinuz-$kver" "$RXE_VM_DIR/kernel.tmp/vmlinuz"
  # An uncompressed ELF vmlinux boots through QEMU's PVH entry and skips ~4-5 s of
  # TCG-emulated XZ decompression; fall back to the bzImage if extraction fails.
  if grep -qx CONFIG_PVH=y "$RXE_VM_DIR/kernel.tmp/boot/config-$kver"; then
    for fmt in $'\xfd7zXZ:xz' $'\x1f\x8b\x08:gzip' $'\x28\xb5\x2f\xfd:zstd'; do
      command -v "${fmt#*:}" >/dev/null || continue
      for off in $( { LC_ALL=C grep -abo "${fmt%:*}" "$RXE_VM_DIR/kernel.tmp/vmlinuz" || true; } | cut -d: -f1 | head -3); do
        tail -c +$((off + 1)) "$RXE_VM_DIR/kernel.tmp/vmlinuz" | "${fmt#*:}" -dc > "$RXE_VM_DIR/kernel.tmp/vmlinux" 2>/dev/null || true
        cmp -s -n 4 <(printf '\177ELF') "$RXE_VM_DIR/kernel.tmp/vmlinux" && break 2
      done
    done
    cmp -s -n 4 <(printf '\177ELF') "$RXE_VM_DIR/kernel.tmp/vmlinux" || rm -f "$RXE_VM_DIR/kernel.tmp/vmlinux"
  fi
  echo "$kver" > "$RXE_VM_DIR/kernel.tmp/KVER"
  rm -rf "$RXE_VM_DIR/kernel" "$RXE_VM_DIR/debs"; mv "$RXE_VM_DIR/kernel.tmp" "$RXE_VM_DIR/kernel"
fi
KDIR=$RXE_VM_DIR/kernel
KVER=$(cat "$KDIR/KVER")

# ------------------------------------------------------------------ initramfs
INITRD=$RXE_VM_DIR/initramfs-$KVER.cpio.gz
if [ ! -s "$INITRD" ] || [ "$INITRD" -ot "$0" ]; then
  log "building $INITRD"
  R=$(mktemp -d "$RXE_VM_DIR/initramfs.XXXXXX")
  mkdir -p "$R"/{bin,dev,proc,sys,lower,rw,newroot,modules}
  cp /bin/busybox "$R/bin/busybox"
  order=()
  add_mod() {                        # add module + its dependencies, deps first
    local m=$1 f d
    for d in "${order[@]}"; do [ "$d" = "$m" ] && return 0; done
    f=$(find "$KDIR/lib/modules/$KVER/kernel" \( -name "$m.ko" -o -name "${m//_/-}.ko" -o -name "$m.ko.xz" -o -name "${m//_/-}.ko.xz" \) | head -1)
    [ -n "$f" ] || die "module $m not found"
    case $f in *.xz) xz -dc "$f" > "$R/modules/$m.ko";; *) cp "$f" "$R/modules/$m.ko";; esac
    for d in $(tr '\0' '\n' < "$R/modules/$m.ko" | grep -a -m1 '^depends=' | cut -d= -f2 | tr ',' ' '); do
      add_mod "$d"
    done
    order+=("$m")
  }
  for m in virtio_pci 9pnet_virtio 9p overlay dummy virtio_net crc32_generic rdma_rxe; do add_mod "$m"; done
  printf '%s\n' "${order[@]}" > "$R/modules.order"
  cat > "$R/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
st() { grep -q rxevm.trace /proc/cmdline && echo "rxe-vm: t=$(cut -d' ' -f1 /proc/uptime)s $*"; return 0; }
st init started
for m in $(cat /modules.order); do insmod /modules/$m.ko || echo "rxe-vm: insmod $m failed"; done
st modules loaded
fail() { echo "rxe-vm: guest setup failed: $*"; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=262144 hostroot /lower || fail 9p-root
mount -t tmpfs -o mode=755 tmpfs /rw && mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || fail overlay
N=/newroot
mount -t proc proc $N/proc; mount -t sysfs sysfs $N/sys; mount -t devtmpfs devtmpfs $N/dev
mkdir -p $N/dev/pts $N/dev/shm $N/rxe-vm-io
mount -t devpts devpts $N/dev/pts; mount -t tmpfs tmpfs $N/dev/shm; mount -t tmpfs tmpfs $N/run
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 io $N/rxe-vm-io || fail 9p-io
RW=$(cat $N/rxe-vm-io/rw_dir 2>/dev/null)
[ -n "$RW" ] && { mkdir -p "$N$RW"; mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 rw "$N$RW" || fail 9p-rw; }
st mounts done
chroot $N /bin/bash /rxe-vm-io/guest.sh </dev/null
st guest.sh done
sync
poweroff -f
EOF
  chmod +x "$R/init"
  (cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp"
  mv "$INITRD.tmp" "$INITRD"; rm -rf "$R"
fi
flock -u 9; exec 9>&-

# ------------------------------------------------------------------------ run
IO=$(mktemp -d "$RXE_VM_DIR/run.XXXXXX")
cleanup() { rm -rf "$IO"; }
trap cleanup EXIT
printf '%s\n' "$RW_DIR" > "$IO/rw_dir"
{
  echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8'
  for v in ${RXE_VM_PASSENV:-}; do if [ -n "${!v+x}" ]; then printf 'export %s=%q\n' "$v" "${!v}"; fi; done
  echo 'rc=125'
  echo 'trap '\''echo $rc > /rxe-vm-io/rc'\'' EXIT'
  if [ -n "$NET" ]; then echo 'nd=eth0'
  else echo 'nd=dummy0; ip link show dummy0 >/dev/null 2>&1 || ip link add dummy0 type dummy'; fi
  echo "ip link set lo up && ip addr add $IP/24 dev \$nd && ip link set \$nd up &&"
  echo '  rdma link add rxe0 type rxe netdev $nd || { echo "rxe-vm: rxe setup failed"; exit; }'
  echo ': > /rxe-vm-io/started'
  echo 'echo "[rxe-vm] guest up $(cut -d" " -f1 /proc/uptime)s after kernel start; running command" >&2'
  printf 'cd %q || exit\n' "$PWD"
  printf '%q ' "$@"; echo '</dev/null'   # the command itself; stdout/stderr go to the serial console
  echo 'rc=$?'
} > "$IO/guest.sh"

accel_args() {
  case $1 in
    kvm) accel=(-accel kvm -cpu host) ;;
    *)   accel=(-accel tcg -cpu max) ;;
  esac
}
accel_args "$ACCEL"
# no_timer_check: a slow (emulated, loaded) host otherwise fails the boot-time
# timer check now and then ("IO-APIC + timer doesn't work!" panic).
append="console=ttyS0 panic=-1 mitigations=off no_timer_check"
if [ "$VERBOSE" = 1 ]; then append+=" rxevm.trace"; else append+=" quiet loglevel=1"; fi
extra=()
if [ -n "$NET" ]; then
  IFS=. read -r _ o2 o3 o4 <<<"$IP"
  extra+=(-netdev "$NET,id=n0" -device "virtio-net-pci,netdev=n0,mac=$(printf '52:54:%02x:%02x:%02x:01' "$o2" "$o3" "$o4")")
fi
if [ -n "$RW_DIR" ]; then extra+=(-virtfs "local,path=$RW_DIR,mount_tag=rw,security_model=none"); fi

KERNEL=$KDIR/vmlinuz; [ -s "$KDIR/vmlinux" ] && KERNEL=$KDIR/vmlinux
run_qemu() {
log "booting $KVER (${KERNEL##*/}, accel=$ACCEL, smp=$SMP, mem=${MEM}M)"
set +e
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 "${accel[@]}" -smp "$SMP" -m "$MEM" \
  -nodefaults -no-user-config -display none -monitor none -serial stdio -no-reboot \
  -kernel "$KERNEL" -initrd "$INITRD" -append "$append" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$IO,mount_tag=io,security_model=none" \
  "${extra[@]}" </dev/null &
qpid=$!                                # the pid of *our* timeout+qemu; killed if we are
trap 'kill -TERM $qpid 2>/dev/null; exit 130' INT TERM
if [ $auto_kvm = 1 ] && [ "$ACCEL" = kvm ]; then
  # A KVM that cannot run this kernel may hang it in early boot: give up on
  # it when the command has not started after a minute (tcg boots in ~20 s).
  for _ in $(seq 120); do
    { [ -e "$IO/started" ] || ! kill -0 $qpid 2>/dev/null; } && break
    sleep 0.5
  done
  if [ ! -e "$IO/started" ] && kill -0 $qpid 2>/dev/null; then
    log "the kvm guest is not up after 60 s: stopping it"
    kill -TERM $qpid 2>/dev/null
  fi
fi
wait $qpid
qrc=$?
trap - INT TERM
set -e
}
run_qemu
if [ $auto_kvm = 1 ] && [ ! -e "$IO/started" ] && [ $qrc -ne 124 ] && [ $qrc -ne 137 ]; then
  # The command never started, so running it again is safe.
  log "the kvm guest failed before running the command (qemu rc=$qrc): retrying with accel=tcg"
  ACCEL=tcg; accel_args tcg; run_qemu
fi
if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then log "VM timed out after ${TIMEOUT}s"; exit 124; fi
[ -s "$IO/rc" ] || die "no exit status from guest (qemu rc=$qrc)"
rc=$(cat "$IO/rc")
log "guest command exit status: $rc"
exit "$rc"
