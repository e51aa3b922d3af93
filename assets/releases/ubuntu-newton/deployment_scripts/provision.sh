#!/bin/bash
# Partition the first disk, unpack Ubuntu 16.04 with debootstrap, install a boot loader:
# provision.sh PROVISION_JSON
set -euo pipefail
data=$1
disk=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ks_meta"]["pm_data"]["ks_spaces"][0]["id"])' "$data" 2>/dev/null || echo sda)
dev=/dev/$disk
parted -s "$dev" mklabel gpt mkpart bios 1MiB 3MiB set 1 bios_grub on mkpart root ext4 3MiB 100%
mkfs.ext4 -q -F "${dev}2"
mount "${dev}2" /mnt
debootstrap --include=linux-image-generic,grub-pc,openssh-server,python xenial /mnt http://archive.ubuntu.com/ubuntu/
for d in dev proc sys; do mount --bind /$d /mnt/$d; done
chroot /mnt grub-install "$dev"
chroot /mnt update-grub
umount -R /mnt
