# Sourced by the scripts that install the Debian/Ubuntu packages they need (test_python.sh, test_wheel.sh).
# apt_install PACKAGE...: apt-get install, as root or through sudo; returns 1 where there is no apt-get or no way to
# root, so the caller can say what to install by hand.
apt_install() {
  command -v apt-get >/dev/null || return 1
  local sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || return 1
    sudo_cmd=sudo
  fi
  echo "$(basename "$0" .sh): installing $*"
  $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "$@" >/dev/null
}
