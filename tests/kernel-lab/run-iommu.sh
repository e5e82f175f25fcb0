#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The kernel lab's VM with an IOMMU, for what vfio-pci needs: the lab's own run.sh (same options,
# same root file system, shares, NICs and exit statuses) with QEMU's q35 machine and an emulated
# Intel IOMMU (-machine q35 -device intel-iommu,intremap=on) and `intel_iommu=on iommu=pt` on the
# kernel's command line, so that a PCI function can be bound to vfio-pci (without an IOMMU its probe
# fails with -22; Debian's kernel has no VFIO no-IOMMU mode). iommu=pt leaves the host's own drivers
# untranslated. vfio-pci is loaded with the lab's modules.
#
#   run-iommu.sh [run.sh's options] -- CMD [ARG...]
#
# The lab's run.sh is IBCNI_KERNEL_LAB_RUN, else ../shared/kernel-lab/run.sh beside the repository.
# Its QEMU line is changed in a private copy, dated as run.sh so that run.sh's initrd cache stays
# valid; a run.sh whose QEMU line no longer has the expected shape is refused, not guessed at.
set -euo pipefail
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
lab=${IBCNI_KERNEL_LAB_RUN:-$here/../../../shared/kernel-lab/run.sh}
[[ -r $lab ]] || { echo "run-iommu: the kernel lab's run.sh is not at $lab (IBCNI_KERNEL_LAB_RUN)" >&2; exit 2; }
for want in '-accel tcg' '-append "console=ttyS0'; do
  if ! grep -qF -- "$want" "$lab"; then
    echo "run-iommu: $lab has no '$want' on its QEMU line: cannot add the IOMMU to it" >&2
    exit 2
  fi
done
copy=$(mktemp /tmp/run-iommu.XXXXXX)
trap 'rm -f "$copy"' EXIT
sed -e 's/-accel tcg/-machine q35 -device intel-iommu,intremap=on -accel tcg/' \
  -e 's/-append "console=ttyS0/-append "intel_iommu=on iommu=pt console=ttyS0/' "$lab" >"$copy"
touch -r "$lab" "$copy"
bash "$copy" --modules "vfio-pci" "$@"
