# shellcheck shell=bash
# socket_up KEY SECONDS: whether the publisher of KEY listens in
# $CUFRAMES_RUNTIME_DIR within SECONDS (looked at every 50 ms). Each suite's
# wait_socket says in its own way what not finding it means.
socket_up() {
    local i
    for i in $(seq $(($2 * 20))); do
        [ -S "$CUFRAMES_RUNTIME_DIR/$1.sock" ] && return 0
        sleep 0.05
    done
    return 1
}
