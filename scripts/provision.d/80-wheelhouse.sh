# A wheelhouse of composegen's runtime dependencies (.cache/wheelhouse, in this checkout) for the installed-tool
# tests: they install the built wheel with `uv tool install --offline --no-index --find-links`, so the suite
# never needs the package index mid-run. Made (or topped up) here, while set-up may reach the index.
ensure_wheelhouse() {
    local house=.cache/wheelhouse requirements=.cache/wheelhouse.txt
    mkdir -p "$house"
    .venv/bin/python -c 'import tomllib, sys; sys.stdout.write("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]) + "\n")' >"$requirements"
    # and the lowest openai allowed, with its own dependencies: tests/wire/test_openai_versions.py runs the gates with it
    local floor
    floor="$(sed -n 's/^openai>=\([0-9.]*\).*/openai==\1/p' "$requirements")"
    # what the house was last filled for, and holds: unchanged, pip is not asked again (~40 s of index
    # round trips a run); a changed requirement or a missing wheel fills it again
    local stamp=.cache/wheelhouse.stamp want
    want="$( (cat "$requirements"; echo "$floor"; ls "$house") | sha256sum | cut -c1-16)"
    if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        log "wheelhouse: $(ls "$house" | wc -l) wheels in $house (unchanged)"
        return 0
    fi
    if .venv/bin/python -m pip download --quiet --dest "$house" --only-binary :all: -r "$requirements" >&2 \
        && .venv/bin/python -m pip download --quiet --dest "$house" --only-binary :all: "$floor" >&2; then
        log "wheelhouse: $(ls "$house" | wc -l) wheels in $house"
        (cat "$requirements"; echo "$floor"; ls "$house") | sha256sum | cut -c1-16 >"$stamp"
    else
        die "pip download into $house failed (the package index is needed once, here)"
    fi
}
