# bash completion for npuctl(8), the administration CLI of npud.
# Installed as $(PREFIX)/share/bash-completion/completions/npuctl. Device numbers, session
# ids and tenant names are asked from the running npud (quietly; nothing when it is down).

_npuctl_query()
{
        # $1: listing (devices, sessions, tenants); prints the ids/names, one per line
        local -a sock=()
        [[ -n $_npuctl_socket ]] && sock=(--socket "$_npuctl_socket")
        npuctl "${sock[@]}" --csv --fields "$2" "$1" 2>/dev/null | tail -n +2
}

_npuctl()
{
        local cur prev words cword
        _init_completion 2>/dev/null || {
                COMPREPLY=()
                cur=${COMP_WORDS[COMP_CWORD]}
                prev=${COMP_WORDS[COMP_CWORD-1]}
                words=("${COMP_WORDS[@]}")
                cword=$COMP_CWORD
        }
        local commands="devices device top health sessions session mem drain undrain reset fault
                        tenants tenant quota cdi slurm sched reload topo diag tune version help"
        local globals="--socket --json --csv --fields --watch --loop --count --version --help"
        local _npuctl_socket="" cmd="" i
        local -a args=()

        # find the socket (for queries), the command and its operands so far
        for ((i = 1; i < cword; i++)); do
                case ${words[i]} in
                --socket) _npuctl_socket=${words[i+1]}; ((i++)) ;;
                --socket=*) _npuctl_socket=${words[i]#--socket=} ;;
                --fields|--watch|--count|--device|-l|--loop) ((i++)) ;;
                -*) ;;
                *) if [[ -z $cmd ]]; then cmd=${words[i]}; else args+=("${words[i]}"); fi ;;
                esac
        done

        case $prev in
        --socket|-o|--host-socket) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --fields)
                # field names from npuctl itself (--fields help needs no npud); after a
                # comma, complete the next name of the list
                local done="" part=$cur f
                [[ $cur == *,* ]] && done=${cur%,*}, && part=${cur##*,}
                local -a names=()
                [[ -n $cmd ]] && names=($(npuctl "$cmd" "${args[@]}" --fields help 2>/dev/null))
                COMPREPLY=()
                for f in "${names[@]}"; do
                        [[ $f == "$part"* && ,$done != *,$f,* ]] && COMPREPLY+=("$done$f")
                done
                compopt -o nospace 2>/dev/null
                return ;;
        --watch|--count|-l|--loop) return ;;
        --device) COMPREPLY=($(compgen -W "$(_npuctl_query devices id)" -- "$cur")); return ;;
        esac
        if [[ $cur == -* ]]; then
                local extra=""
                [[ $cmd == quota && ${args[0]} == set ]] && extra="--device"
                [[ $cmd == devices ]] && extra="--history"
                [[ $cmd == diag ]] && extra="-r"
                [[ $cmd == tenant && ${args[0]} == add ]] &&
                        extra="--uid --gid --devices --quota --quota-per-device --class --weight"
                [[ $cmd == cdi && ${args[0]} == generate ]] && extra="-o --host-socket"
                [[ $cmd == cdi && ${args[0]} == tenants ]] && extra="--uid --gid"
                [[ $cmd == slurm ]] && extra="--name --type"
                COMPREPLY=($(compgen -W "$globals $extra" -- "$cur"))
                return
        fi
        if [[ -z $cmd ]]; then
                COMPREPLY=($(compgen -W "$commands" -- "$cur"))
                return
        fi
        local n=${#args[@]}
        case $cmd in
        device)
                if ((n == 0)); then COMPREPLY=($(compgen -W "show" -- "$cur"))
                elif ((n == 1)); then COMPREPLY=($(compgen -W "$(_npuctl_query devices id)" -- "$cur")); fi ;;
        mem|drain|undrain|reset)
                ((n == 0)) && COMPREPLY=($(compgen -W "$(_npuctl_query devices id)" -- "$cur")) ;;
        session)
                if ((n == 0)); then COMPREPLY=($(compgen -W "kill" -- "$cur"))
                elif ((n == 1)); then COMPREPLY=($(compgen -W "$(_npuctl_query sessions id)" -- "$cur")); fi ;;
        fault)
                if ((n == 0)); then COMPREPLY=($(compgen -W "inject clear" -- "$cur"))
                elif ((n == 1)); then COMPREPLY=($(compgen -W "$(_npuctl_query devices id)" -- "$cur"))
                elif ((n == 2)) && [[ ${args[0]} == inject ]]; then
                        COMPREPLY=($(compgen -W "fail-next fail-device slow ecc-corrected ecc-uncorrected" -- "$cur"))
                fi ;;
        quota)
                if ((n == 0)); then COMPREPLY=($(compgen -W "show set" -- "$cur"))
                elif ((n == 1)); then COMPREPLY=($(compgen -W "$(_npuctl_query tenants name)" -- "$cur")); fi ;;
        tenant)
                if ((n == 0)); then COMPREPLY=($(compgen -W "add remove" -- "$cur"))
                elif ((n == 1)) && [[ ${args[0]} == remove ]]; then
                        COMPREPLY=($(compgen -W "$(_npuctl_query tenants name)" -- "$cur")); fi ;;
        cdi)
                ((n == 0)) && COMPREPLY=($(compgen -W "generate tenants" -- "$cur")) ;;
        slurm)
                ((n == 0)) && COMPREPLY=($(compgen -W "gres" -- "$cur")) ;;
        diag)
                [[ $prev == -r ]] && COMPREPLY=($(compgen -W "1 2 3" -- "$cur")) ;;
        tune)
                ((n == 0)) && COMPREPLY=($(compgen -W "list clear" -- "$cur"))
                ((n == 1)) && COMPREPLY=($(compgen -W "MatMul Gemm Conv ConvTranspose" -- "$cur")) ;;
        help)
                ;;
        esac
}

complete -F _npuctl npuctl
