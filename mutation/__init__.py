"""The mutation score's tooling (scripts/mutation.sh) beside what it keeps between runs: the
kept verdicts (cache.tar.gz), the equivalent mutants with their reasons (equivalent.toml)
and which tests killed which functions' mutants (killers.json)."""
