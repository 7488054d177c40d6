#!/usr/bin/env bash
# cluster_test.sh: the test cluster itself (cluster.sh). Two clusters side by
# side do not collide; each host has its name, its address and a link to the
# others; a rate puts tbf on both ends of a link; a link taken down cuts the
# host off and back up restores it; `down` removes everything; `with`
# removes its cluster when the command fails, when it is sent TERM, and
# (at the next `up`) after it was killed with -9. Skips (77) where no
# cluster can be made.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$(readlink -f "$0")")/lib.sh"
"$cluster" check

a=ta$$ b=tb$$
export PIPEVM_CLUSTER_OWNER=$$ # if this test is killed, the next up removes them
trap '"$cluster" down --name $a; "$cluster" down --name $b' EXIT
# Running (a process killed but not yet reaped by its new parent is a zombie).
alive() { [[ -e /proc/$1/stat && $(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat") != Z ]]; }
namespaces() { ip netns list | awk -v p="pvc-$1-" 'index($1, p) == 1 { print $1 }' | sort | paste -sd' '; }

# Connects from one host to an address's port 9 (nothing listens): a refusal
# means the address answered.
reaches() { # cluster host address
  local error
  error=$("$cluster" run --name "$1" --host "$2" timeout 1 bash -c "exec 3<>/dev/tcp/$3/9" 2>&1) && return 0
  [[ $error == *"Connection refused"* ]]
}

"$cluster" up 2 --name "$a"
"$cluster" up 3 --name "$b" --rate 100mbit --slots 1
[[ $(namespaces "$a") == "pvc-$a-h1 pvc-$a-h2 pvc-$a-sw" ]] || fail "cluster $a: $(namespaces "$a")"
[[ $(namespaces "$b") == "pvc-$b-h1 pvc-$b-h2 pvc-$b-h3 pvc-$b-sw" ]] || fail "cluster $b: $(namespaces "$b")"
[[ $(cat "/run/pipevm-cluster/$b/hosts") == $'h1 slots=1\nh2 slots=1\nh3 slots=1' ]] ||
  fail "hostfile of $b: $(cat "/run/pipevm-cluster/$b/hosts")"
[[ $("$cluster" run --name "$b" --host h3 hostname) == h3 ]] || fail "h3 is not named h3"
[[ $("$cluster" run --name "$b" --host h3 ip -4 -o addr show dev pvnet0) == *198.18.0.13/24* ]] ||
  fail "h3 has not 198.18.0.13"
[[ $(hostname) != h[0-9]* ]] || fail "the machine's own hostname changed"
reaches "$b" h1 198.18.0.13 || fail "h1 does not reach h3 in cluster $b"
reaches "$a" h2 198.18.0.11 || fail "h2 does not reach h1 in cluster $a"
! reaches "$a" h1 198.18.0.13 || fail "cluster $a reaches a host of cluster $b"
echo "two clusters side by side: names, addresses, links"

[[ $("$cluster" run --name "$b" --host h2 tc qdisc show dev pvnet0) == *"tbf"*"rate 100Mbit"* ]] ||
  fail "no tbf on h2's side of its link"
[[ $(tc -n "pvc-$b-sw" qdisc show dev h2) == *"tbf"*"rate 100Mbit"* ]] ||
  fail "no tbf on the switch's side of h2's link"
[[ $("$cluster" run --name "$a" --host h2 tc qdisc show dev pvnet0) != *tbf* ]] ||
  fail "cluster $a's links are limited"
# The bucket holds 250 us at the rate, at least 16 KiB; GSO packets half of it.
[[ $(tc -n "pvc-$b-sw" qdisc show dev h2) == *"burst 16Kb"* ]] ||
  fail "the bucket at 100mbit is not 16 KiB: $(tc -n "pvc-$b-sw" qdisc show dev h2)"
[[ $(ip -n "pvc-$b-h2" -d link show pvnet0) == *"gso_max_size 8192 "* ]] ||
  fail "GSO packets at 100mbit are not limited to 8 KiB"
"$cluster" rate h2 unlimited --name "$b"
[[ $("$cluster" run --name "$b" --host h2 tc qdisc show dev pvnet0) != *tbf* ]] ||
  fail "rate unlimited left a tbf"
[[ $(ip -n "pvc-$b-h2" -d link show pvnet0) == *"gso_max_size 65536 "* ]] ||
  fail "rate unlimited left the GSO limit"
echo "rates: tbf with a 250 us bucket and GSO limited on both ends of a link, removed by 'rate HOST unlimited'"

"$cluster" link h2 down --name "$a"
! reaches "$a" h1 198.18.0.12 || fail "h1 reaches h2 while h2's link is down"
"$cluster" link h2 up --name "$a"
for _ in $(seq 30); do
  if reaches "$a" h1 198.18.0.12; then break; fi
  sleep 0.1
done
reaches "$a" h1 198.18.0.12 || fail "h1 does not reach h2 once its link is back up"
echo "link h2 down cuts h2 off; up restores it"

"$cluster" down --name "$a"
[[ -z $(namespaces "$a") && ! -e /run/pipevm-cluster/$a ]] || fail "down left $(namespaces "$a")"
[[ -n $(namespaces "$b") ]] || fail "taking $a down removed $b"
"$cluster" down --name "$b"
echo "down removes a cluster and only that one"

status=0
# shellcheck disable=SC2016 # the cluster's shell expands them
"$cluster" with 2 -- sh -c 'echo "$CLUSTER_NAME" >"$0"; exit 3' "/tmp/cluster_test.$$" 2>/dev/null ||
  status=$?
made=$(cat "/tmp/cluster_test.$$")
((status == 3)) || fail "with returned $status, not the command's 3"
[[ -z $(namespaces "$made") && ! -e /run/pipevm-cluster/$made ]] || fail "with left $made after a failure"

for signal in TERM KILL; do
  # shellcheck disable=SC2016 # the cluster's shell expands them
  "$cluster" with 2 -- sh -c 'echo "$CLUSTER_NAME $$" >"$0"; exec sleep 60' "/tmp/cluster_test.$$" \
    2>/dev/null &
  owner=$!
  for _ in $(seq 100); do
    if [[ -s /tmp/cluster_test.$$ && $(cut -d' ' -f1 "/tmp/cluster_test.$$") != "$made" ]]; then
      break
    fi
    sleep 0.1
  done
  read -r made sleeper <"/tmp/cluster_test.$$"
  kill "-$signal" "$owner"
  wait "$owner" 2>/dev/null || true
  # After KILL no trap ran: the next up sweeps the cluster away.
  [[ $signal == TERM ]] || "$cluster" up 1 --name "$a" >/dev/null
  [[ -z $(namespaces "$made") && ! -e /run/pipevm-cluster/$made ]] ||
    fail "with left $made after $signal"
  if alive "$sleeper"; then fail "with left its command running after $signal"; fi
done
rm -f "/tmp/cluster_test.$$"
echo "with removes its cluster after a failure, after TERM, and after KILL at the next up"
