#!/bin/sh
# build.sh BIN VERSION OUTDIR: lays out the coopfs Debian package around the
# binary BIN and builds OUTDIR/coopfs_VERSION_ARCH.deb with dpkg-deb (make deb).
set -eu
bin=$1 version=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
deploy=$(dirname "$here")
arch=$(dpkg --print-architecture)
root=$(mktemp -d)
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$bin" "$root/usr/bin/coopfs"
# mount(8) runs /sbin/mount.fuse.coopfs (and mount.coopfs for -t coopfs);
# /sbin is /usr/sbin on merged-/usr systems.
mkdir -p "$root/usr/sbin"
ln -s ../bin/coopfs "$root/usr/sbin/mount.fuse.coopfs"
ln -s ../bin/coopfs "$root/usr/sbin/mount.coopfs"
install -D -m 0644 "$deploy/systemd/coopfs-serve.service" "$root/usr/lib/systemd/system/coopfs-serve.service"
install -D -m 0644 "$deploy/systemd/coopfs-proxy.service" "$root/usr/lib/systemd/system/coopfs-proxy.service"
install -D -m 0644 "$deploy/etc/serve.env" "$root/etc/coopfs/serve.env"
install -D -m 0644 "$deploy/etc/proxy.env" "$root/etc/coopfs/proxy.env"
doc=$root/usr/share/doc/coopfs
install -D -m 0644 "$deploy/etc/fstab.example" "$doc/examples/fstab.example"
install -D -m 0644 "$deploy/systemd/mnt-coopfs.mount" "$doc/examples/mnt-coopfs.mount"
for f in "$deploy"/kubernetes/*.yaml "$deploy"/grafana/*.json; do
	[ -e "$f" ] && install -D -m 0644 "$f" "$doc/examples/$(basename "$f")"
done
# The man pages come from the commands' own help.
"$bin" man "$root/usr/share/man/man1" >/dev/null
mkdir -p "$root/usr/share/man/man8"
mv "$root/usr/share/man/man1/mount.fuse.coopfs.8" "$root/usr/share/man/man8/"
gzip -9n "$root"/usr/share/man/man*/*
install -d "$root/DEBIAN"
size=$(du -sk "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CTL
Package: coopfs
Version: $version
Architecture: $arch
Maintainer: coopfs developers <coopfs@example.org>
Installed-Size: $size
Depends: fuse3
Section: admin
Priority: optional
Homepage: https://github.com/coopfs/coopfs
Description: cooperative-caching distributed file system
 coopfs exports a directory tree to FUSE clients that cache what they read
 in memory and on disk and serve each other's cache misses. This package
 holds the coopfs binary (server, mount, proxy, CSI node driver, operator
 commands), the mount helper for fstab (mount.fuse.coopfs), systemd units
 for the server and the proxy, and their default settings in /etc/coopfs.
CTL
printf '/etc/coopfs/serve.env\n/etc/coopfs/proxy.env\n' > "$root/DEBIAN/conffiles"
cat > "$root/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
SH
cat > "$root/DEBIAN/postrm" <<'SH'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
SH
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm"
mkdir -p "$out"
dpkg-deb --root-owner-group -Zgzip --build "$root" "$out/coopfs_${version}_${arch}.deb" >/dev/null
echo "$out/coopfs_${version}_${arch}.deb"
