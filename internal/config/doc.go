// Package config loads and validates the settings of amk's two daemons, the
// scheduler and the gpuworker, with viper.
//
// Every setting has a key (e.g. "redis.addr", "trial_timeout") and comes
// from, in order of precedence: a command-line flag, an AMK_* environment
// variable (the key upper-cased with dots as underscores: AMK_REDIS_ADDR,
// AMK_REDIS_PASSWORD, AMK_TRIAL_TIMEOUT), the YAML file named by --config
// (or AMK_CONFIG), and the built-in default. No file is searched for: a
// config file is used only when named. Unknown keys in the file are errors
// (a typo never silently falls back to a default).
//
// Load* validate everything before a daemon starts and report each problem
// as a *FieldError naming the key and how to set it (errors.Join of all of
// them). Secrets (the Redis password, the API token) are never printed: the
// configs' LogValue and String redact them. deploy/scheduler.example.yaml
// and deploy/gpuworker.example.yaml document every key; the tests load and
// validate them.
package config
