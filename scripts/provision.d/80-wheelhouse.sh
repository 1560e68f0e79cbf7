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
    if .venv/bin/python -m pip download --quiet --dest "$house" --only-binary :all: -r "$requirements" >&2 \
        && .venv/bin/python -m pip download --quiet --dest "$house" --only-binary :all: "$floor" >&2; then
        log "wheelhouse: $(ls "$house" | wc -l) wheels in $house"
    else
        die "pip download into $house failed (the package index is needed once, here)"
    fi
}
