#!/usr/bin/env bash
# The real clients and servers the test suite drives (testing.md). Run before `vitest` by `npm test`:
# missing tools are installed with apt-get when we can (root on Debian), otherwise we stop with the
# exact command to run. Tests never skip silently for a missing tool.
set -euo pipefail

# command -> Debian package
declare -A TOOLS=(
  [sftp]=openssh-client
  [ssh-keygen]=openssh-client
  [sshd]=openssh-server
  [sshpass]=sshpass
  [litmus]=litmus
  [rclone]=rclone
  [mount.davfs]=davfs2
  [sshfs]=sshfs
  [fusermount3]=fuse3
  [curl]=curl
  [chromium]=chromium
  [aria2c]=aria2
  [qbittorrent-nox]=qbittorrent-nox
  [vsftpd]=vsftpd
  [nginx]=nginx
  [lftp]=lftp
  [cadaver]=cadaver
  [wget]=wget
  [psftp]=putty-tools
  [chattr]=e2fsprogs
  [prlimit]=util-linux
  [ffmpeg]=ffmpeg
  [ffprobe]=ffmpeg
)

missing=()
for cmd in "${!TOOLS[@]}"; do
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
    missing+=("${TOOLS[$cmd]}")
  fi
done
# Tools that are files rather than commands.
[ -e /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ] || missing+=(libnginx-mod-http-dav-ext)
[ ${#missing[@]} -eq 0 ] && exit 0

pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing test tools: $pkgs"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $pkgs
else
  echo "The test suite drives real clients that are missing here. Install them with:" >&2
  echo "  sudo apt-get install -y $pkgs" >&2
  exit 1
fi
