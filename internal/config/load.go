package config

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/spf13/pflag"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/amk-dev/amk/inputfile"
)

// EnvPrefix is the prefix of every environment variable read.
const EnvPrefix = "AMK"

// FieldError is one invalid setting.
type FieldError struct {
	Key string // e.g. "redis.addr"
	Msg string
}

func (e *FieldError) Error() string { return fmt.Sprintf("config: %s: %s", e.Key, e.Msg) }

// flagSpec binds a command-line flag to a key.
type flagSpec struct {
	name  string
	key   string
	kind  kind
	usage string
}

type kind int

const (
	kString kind = iota
	kInt
	kBool
	kDuration
)

// EnvName is the environment variable of key.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// register adds the flags (and --config) to fs, showing defaults in -h.
func register(fs *pflag.FlagSet, specs []flagSpec, defaults map[string]any) {
	fs.String("config", "", "YAML config file (also "+EnvPrefix+"_CONFIG)")
	for _, s := range specs {
		usage := fmt.Sprintf("%s (key %s, env %s)", s.usage, s.key, EnvName(s.key))
		switch s.kind {
		case kBool:
			def, _ := defaults[s.key].(bool)
			fs.Bool(s.name, def, usage)
		case kInt:
			def, _ := defaults[s.key].(int)
			fs.Int(s.name, def, usage)
		case kDuration:
			def, _ := defaults[s.key].(time.Duration)
			fs.Duration(s.name, def, usage)
		default:
			fs.String(s.name, fmt.Sprint(orEmpty(defaults[s.key])), usage)
		}
	}
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	if ss, ok := v.([]string); ok {
		return strings.Join(ss, ",")
	}
	return v
}

// load merges defaults, the config file, the environment and the flags that
// were set on fs (after fs.Parse; the flags are bound to viper keys) into out.
func load(fs *pflag.FlagSet, specs []flagSpec, defaults map[string]any, out any) error {
	v := viper.New()
	for k, d := range defaults {
		v.SetDefault(k, d)
	}
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()

	path := os.Getenv(EnvPrefix + "_CONFIG")
	if f := fs.Lookup("config"); f != nil && f.Value.String() != "" {
		path = f.Value.String()
	}
	if path != "" {
		if err := readFile(v, path, defaults); err != nil {
			return err
		}
	}
	// A flag given on the command line wins over the environment and the
	// file; an unset flag's default is the same as the key's.
	for _, s := range specs {
		if err := v.BindPFlag(s.key, fs.Lookup(s.name)); err != nil {
			return fmt.Errorf("config: flag --%s: %w", s.name, err)
		}
	}
	err := v.Unmarshal(out, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		strictDurationHook, commaSliceHook)))
	if err != nil {
		return decodeError(err)
	}
	return nil
}

// decodeError turns mapstructure's "'key' reason" lines into FieldErrors.
func decodeError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "decoding failed due to the following error(s):")
	var errs []error
	for line := range strings.SplitSeq(msg, "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "* ")
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "'"); ok {
			if key, reason, ok := strings.Cut(rest, "'"); ok {
				errs = append(errs, &FieldError{Key: key, Msg: strings.TrimSpace(reason)})
				continue
			}
		}
		errs = append(errs, errors.New("config: "+line))
	}
	if len(errs) == 0 {
		return fmt.Errorf("config: %w", err)
	}
	return errors.Join(errs...)
}

// maxConfigFileBytes bounds a daemon's YAML configuration file.
const maxConfigFileBytes = 1 << 20

// maxSecretFileBytes bounds a file holding a password, a token or a secret.
const maxSecretFileBytes = 64 << 10

// readFile reads the YAML file into v and rejects keys no daemon knows.
func readFile(v *viper.Viper, path string, defaults map[string]any) error {
	data, err := inputfile.ReadFile(path, maxConfigFileBytes) // regular files only, never blocks
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	fv := viper.New()
	fv.SetConfigType("yaml")
	if err := fv.ReadConfig(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	var errs []error
	for _, k := range fv.AllKeys() {
		if _, known := defaults[k]; !known {
			errs = append(errs, &FieldError{Key: k, Msg: fmt.Sprintf("unknown key in %s%s", path, suggest(k, defaults))})
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return v.MergeConfigMap(fv.AllSettings())
}

// suggest names the known keys under an unknown section, or close siblings.
func suggest(key string, defaults map[string]any) string {
	var near []string
	for k := range defaults {
		if strings.HasPrefix(k, key+".") {
			near = append(near, k)
		}
	}
	if len(near) == 0 {
		return ""
	}
	sort.Strings(near)
	return " (known keys: " + strings.Join(near, ", ") + ")"
}

var durationType = reflect.TypeFor[time.Duration]()

// strictDurationHook parses "90s"-style strings and refuses bare numbers,
// which would otherwise silently become nanoseconds.
func strictDurationHook(f reflect.Type, t reflect.Type, data any) (any, error) {
	if t != durationType {
		return data, nil
	}
	switch f.Kind() {
	case reflect.String:
		d, err := time.ParseDuration(strings.TrimSpace(data.(string)))
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration (write e.g. 90s, 10m, 1h)", data)
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if f == durationType {
			return data, nil
		}
		return nil, fmt.Errorf("%v has no unit (write e.g. %vs)", data, data)
	}
	return data, nil
}

// commaSliceHook splits "a,b" (from a flag or the environment) into a list.
func commaSliceHook(f reflect.Type, t reflect.Type, data any) (any, error) {
	if f.Kind() != reflect.String || t.Kind() != reflect.Slice {
		return data, nil
	}
	return strings.FieldsFunc(data.(string), func(r rune) bool { return r == ',' || r == ' ' }), nil
}
