# SPDX-License-Identifier: Apache-2.0
# make_node_root DIR IBCNI [SKIP_LIB] (source it): a fake node root for chroot holding what ldd
# says IBCNI needs (the loader, libc, libgcc_s, libmnl) except SKIP_LIB, and an empty
# /opt/cni/bin. ibcni-ipam, which needs a subset of it without libmnl, runs in it too.
make_node_root() {
  local root=$1 bin=$2 skip=${3:-} lib path
  mkdir -p "$root/lib/x86_64-linux-gnu" "$root/lib64" "$root/opt/cni/bin"
  while read -r lib path; do
    [[ -z $path || $lib == "$skip" ]] && continue
    cp -L "$path" "$root/lib/x86_64-linux-gnu/$lib"
  done < <(ldd "$bin" | awk '/=> \// {print $1, $3}')
  cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
}

# make_node_root_arm64 DIR IBCNI [SKIP_LIB]: the same for an arm64 node (an aarch64 IBCNI), from the
# arm64 libraries this machine has through multiarch (its cross build's); its programs run here
# through binfmt (tests/support/binfmt_arm64.sh). ldd cannot read a foreign binary: the libraries
# are its NEEDED entries, with libgcc_s, which glibc loads itself.
make_node_root_arm64() {
  local root=$1 bin=$2 skip=${3:-} lib
  mkdir -p "$root/lib/aarch64-linux-gnu" "$root/opt/cni/bin"
  for lib in $(readelf -d -W "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p') libgcc_s.so.1; do
    [[ $lib == "$skip" ]] && continue
    cp -L "/lib/aarch64-linux-gnu/$lib" "$root/lib/aarch64-linux-gnu/$lib"
  done
  cp -L /lib/ld-linux-aarch64.so.1 "$root/lib/"
}
