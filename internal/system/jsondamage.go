package system

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// JSONDamage describes an encoding/json decoding error by its kind and
// offset, with none of the input's bytes: some of the decoder's own
// errors quote the input, and an input may hold secrets (etcd's
// records). A wrong type names the field only when its path starts with
// one of fields (the caller's own JSON names); what is the thing
// expected, for any other error ("not " + what).
func JSONDamage(err error, what string, fields ...string) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("not JSON (a syntax error at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		field := "a field"
		for _, f := range fields {
			if typ.Field == f || strings.HasPrefix(typ.Field, f+".") {
				field = "field " + f
			}
		}
		return fmt.Sprintf("%s of the wrong type (at byte %d)", field, typ.Offset)
	}
	return "not " + what
}
