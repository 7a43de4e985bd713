# Sourced by the benchmark scripts: a loopback sshd of the script's own (its own host key and
# user key, 127.0.0.1 only), never the machine's sshd or the user's ~/.ssh.
# loopback_sshd HOST: starts it (its pid added to the caller's `pids`, its files in `$work`) and
# sets `ssh` to a command that reaches it as HOST.
loopback_sshd() {
    local host=$1
    mkdir -p /run/sshd 2>/dev/null || true
    ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
    ssh-keygen -q -t ed25519 -N '' -f "$work/user_key"
    cp "$work/user_key.pub" "$work/authorized_keys"
    local port=$((20000 + RANDOM % 30000))
    cat > "$work/sshd_config" <<CONFIG
Port $port
ListenAddress 127.0.0.1
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
X11Forwarding no
CONFIG
    /usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
    pids+=("$!")
    for _ in $(seq 100); do grep -q "Server listening" "$work/sshd.log" && break; sleep 0.05; done
    echo "[127.0.0.1]:$port $(cat "$work/host_key.pub")" > "$work/known_hosts"
    cat > "$work/ssh_config" <<CONFIG
Host $host
  HostName 127.0.0.1
  Port $port
  User $(id -un)
  IdentityFile $work/user_key
  IdentitiesOnly yes
  IdentityAgent none
  UserKnownHostsFile $work/known_hosts
  StrictHostKeyChecking yes
CONFIG
    ssh="ssh -F $work/ssh_config"
}
