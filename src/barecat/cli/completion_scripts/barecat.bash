# Bash completion for barecat. Load it from ~/.bashrc with:
#
#     source "$(barecat completion-script bash)"
#
# The candidates come from `barecat __complete`, which reads barecat's own argument parser
# and, for paths inside an archive, the archive; this file only gathers the words, asks,
# and hands the answer to readline. Needs bash >= 4.

# Readline splits words at the characters in COMP_WORDBREAKS ('=' and ':' among them).
# Glue such pieces back together with the help of COMP_LINE, so that the engine sees
# `--directory=out` and `a:b` whole; the current word ends at the cursor. Falls back to
# COMP_WORDS when the line and the words do not agree.
_barecat_shell_words() {
    local rest=${COMP_LINE:0:COMP_POINT} trimmed piece i
    _barecat_words=()
    for ((i = 0; i <= COMP_CWORD; i++)); do
        piece=${COMP_WORDS[i]}
        trimmed=${rest#"${rest%%[![:space:]]*}"}
        if ((i == COMP_CWORD)); then
            piece=$trimmed
        elif [[ $trimmed != "$piece"* ]]; then
            _barecat_words=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
            return
        fi
        if ((i > 0)) && [[ $trimmed == "$rest" ]]; then
            _barecat_words[${#_barecat_words[@]} - 1]+=$piece
        else
            _barecat_words+=("$piece")
        fi
        rest=${trimmed:${#piece}}
    done
}

# $2 is the (unquoted) text readline will replace; the engine returns candidates for
# exactly that text. Answer: a kind line, then either candidates (kinds `words`, `paths`)
# or, for local files and directories, the prefix to keep, the path typed so far and how
# many leading characters of each full word readline keeps by itself.
_barecat() {
    local _barecat_words reply kind cut prefix item
    _barecat_shell_words
    # Every word goes behind a ':' so that none can pass for an option of __complete.
    mapfile -t reply < <(
        command barecat __complete bash ":$2" "${_barecat_words[@]/#/:}" 2>/dev/null
    )
    kind=${reply[0]-}
    COMPREPLY=()
    case $kind in
    words)
        COMPREPLY=("${reply[@]:1}")
        ;;
    paths)
        # With `filenames`, readline itself adds '/' after names that are directories here
        # on disk (even those ending in '/' already, in listings), so leave that to it.
        compopt -o filenames 2>/dev/null
        for item in "${reply[@]:1}"; do
            [[ $item == */ && -d $item ]] && item=${item%/}
            COMPREPLY+=("$item")
        done
        if ((${#COMPREPLY[@]} == 1)) && [[ ${COMPREPLY[0]} == */ ]]; then
            compopt -o nospace 2>/dev/null
        fi
        ;;
    files | dirs)
        # readline only recognises directories by the text it replaces; when an attached
        # option (`-Cdir`) is part of that text, mark directories here instead.
        compopt -o filenames 2>/dev/null
        prefix=${reply[1]-} cut=${reply[3]-0}
        local flag=-f
        [[ $kind == dirs ]] && flag=-d
        while IFS= read -r item; do
            [[ -n ${prefix:cut} && -d $item ]] && item+=/
            item=$prefix$item
            COMPREPLY+=("${item:cut}")
        done < <(compgen "$flag" -- "${reply[2]-}")
        if ((${#COMPREPLY[@]} == 1)) && [[ ${COMPREPLY[0]} == */ ]]; then
            compopt -o nospace 2>/dev/null
        fi
        ;;
    esac
    return 0
}

complete -F _barecat barecat
