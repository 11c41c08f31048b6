# bash completion for aas(1)
_aas() {
	local cur prev cmd i
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	local cmds="create ls get exec run shell cp files expose extend fork pause resume history metrics network rm usage account login e2b help"
	local global="--url --key --json --help --version"
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--url|--key) ((i++)) ;;
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	case $prev in
	--url|--key|--image|--cwd|-e|--env|--from|--to|--depth|--allow|--deny|--term|--context) return ;;
	--language) COMPREPLY=($(compgen -W "python javascript bash" -- "$cur")); return ;;
	--out-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--size) COMPREPLY=($(compgen -W "small medium large" -- "$cur")); return ;;
	--network) COMPREPLY=($(compgen -W "isolated internet" -- "$cur")); return ;;
	--timeout) COMPREPLY=($(compgen -W "90s 15m 1h 2h" -- "$cur")); return ;;
	esac
	if [ -z "$cmd" ]; then
		COMPREPLY=($(compgen -W "$cmds $global" -- "$cur"))
		return
	fi
	local opts="--url --key --json --help"
	case $cmd in
	create) opts="$opts --size --timeout --image --network --allow --deny --metadata --env" ;;
	network) opts="$opts --isolated --internet --allow --deny" ;;
	ls) opts="$opts --all" ;;
	exec) opts="$opts --timeout --cwd -e -n --" ;;
	run) opts="$opts --language --context -e --env --timeout --out-dir" ;;
	shell) opts="$opts -t -T --term --cwd -e" ;;
	files) opts="$opts --depth --mkdir --remove --move --replace" ;;
	usage) opts="$opts --from --to" ;;
	metrics) opts="$opts --from --to -n" ;;
	fork) opts="$opts -n --count --timeout" ;;
	cp) [[ $cur != -* ]] && { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
	help) COMPREPLY=($(compgen -W "$cmds" -- "$cur")); return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	elif [[ $cmd == run && $prev != run ]]; then
		COMPREPLY=($(compgen -f -- "$cur")) # the code's file, after the sandbox id
	elif [[ $cmd =~ ^(get|exec|run|shell|files|expose|extend|fork|pause|resume|history|metrics|network|rm)$ ]]; then
		# Sandbox ids from the server, quietly (nothing if it cannot be reached).
		COMPREPLY=($(compgen -W "$(aas ls 2>/dev/null | awk 'NR > 1 {print $1}')" -- "$cur"))
	fi
}
complete -F _aas aas
