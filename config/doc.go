// Package config loads chatd's settings.
//
// Every setting has a YAML key, an environment variable and a command-line
// flag; the value comes from the first of these that sets it:
//
//	flag (-max-members 500) > environment (CHAT_MAX_MEMBERS=500) > YAML file (max_members: 500) > default
//
// The YAML file is read only when named, by the -config flag or the
// CHAT_CONFIG variable (the flag wins). configs/chatd.yaml documents every
// key with its default. An environment variable set to the empty string
// is set: it overrides the YAML file with the empty value where a key has
// one (a listener off, a URL or list unset) and is an error where it has
// none (numbers, durations, switches).
//
// Contract:
//   - Load is pure: it reads the arguments, the lookupenv function and the named
//     YAML file only, never the process environment, so tests pass their own.
//   - Every value is validated; an error is a *Error naming the key, where the
//     bad value came from (flag, env or yaml file:line) and what to do. Secret
//     values (jwt_secret, database_url) never appear in error text.
//   - Unknown YAML keys, unknown flags and positional arguments are errors.
//     UnknownEnv lists the CHAT_ variables Load ignores, for a warning.
//   - -help returns an error wrapping flag.ErrHelp; print PrintUsage and exit 0.
//     -version returns one wrapping ErrVersion; print the version and exit 0.
//   - "off" (or "") turns a listener address off: mqtt_addr,
//     http_addr, mqtts_addr, https_addr, metrics_addr.
//   - Redacted returns the settings for logging with secrets masked.
package config
