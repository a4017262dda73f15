package providerreach

import (
	"slices"
	"strings"
)

// tools reads a member "tools": an array of tools, or one tool.
func (s *reachScan) tools(depth int) error {
	switch s.dec.PeekKind() {
	case '[':
	case '{', 'n':
		return s.tool(depth + 1)
	default:
		return s.value(depth + 1)
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	for s.dec.PeekKind() != ']' && s.found == "" {
		if err := s.tool(depth + 2); err != nil {
			return err
		}
	}
	if s.found != "" {
		return nil
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	return nil
}

// tool reads one tool at depth, in one pass: its type must be a local
// one (localToolType) or, without a type, its members a function's or a
// local Gemini tool's; its members are read by the rules of the whole
// body, its schemas excepted. Nested tools (a namespace's) are read the
// same way, so a body is read once however deep its tools nest.
func (s *reachScan) tool(depth int) error {
	if depth > MaxDepth {
		return errTooDeep
	}
	switch s.dec.PeekKind() {
	case 'n':
		return s.value(depth)
	case '{':
	default:
		if err := s.dec.SkipValue(); err != nil {
			return errNotJSON
		}
		s.flag("not an object")
		return nil
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return errNotJSON
	}
	inTool := s.inTool
	s.inTool = true
	defer func() { s.inTool = inTool }()
	var keys []string
	typed := false
	for s.dec.PeekKind() != '}' && s.found == "" {
		if err := s.readName(); err != nil {
			return err
		}
		if string(s.name) != "type" {
			keys = append(keys, string(s.name))
			if err := s.member(depth); err != nil {
				return err
			}
			continue
		}
		if s.dec.PeekKind() != '"' {
			if err := s.dec.SkipValue(); err != nil {
				return errNotJSON
			}
			s.flagTool("type not a string")
			return nil
		}
		t, err := s.readString()
		if err != nil {
			return err
		}
		if !localToolType(t) {
			s.flagTool("type " + shownPointer(t))
			return nil
		}
		typed = true
	}
	if s.found != "" {
		return nil
	}
	if !typed {
		named := slices.Contains(keys, "name")
		for _, k := range keys {
			if !(named && functionToolMembers[k] || geminiLocalTools[k]) {
				s.flagTool("member " + shownPointer(k))
				return nil
			}
		}
	}
	if _, err := s.dec.ReadToken(); err != nil { // "}"
		return errNotJSON
	}
	return nil
}

// flagTool flags the tool being read (the decoder is at one of its
// members) with detail.
func (s *reachScan) flagTool(detail string) {
	p := string(s.dec.StackPointer())
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	s.found = shownPointer(p) + " " + detail
}

// functionToolMembers are the members of a caller-run tool given by name
// without a type (Anthropic's custom tools).
var functionToolMembers = map[string]bool{
	"name": true, "description": true, "inputschema": true, "parameters": true,
	"cachecontrol": true, "strict": true, "deferloading": true, "inputexamples": true,
	"allowedcallers": true, "eagerinputstreaming": true, "annotations": true, "tools": true,
}

// geminiLocalTools are the Gemini tools that reach nothing for the caller.
var geminiLocalTools = map[string]bool{"functiondeclarations": true, "codeexecution": true, "computeruse": true, "filesearch": true}

// localToolType reports whether a tool of type t is run by the caller, or
// by the provider without connecting out.
func localToolType(t string) bool {
	switch strings.ToLower(t) {
	case "function", "custom", "computer", "computer_use_preview", "computer_use", "local_shell", "shell",
		"apply_patch", "code_interpreter", "file_search", "image_generation", "tool_search", "namespace":
		return true
	}
	for _, p := range []string{"bash_", "text_editor_", "computer_", "browser_toolset_", "memory_", "code_execution_", "tool_search_tool_", "advisor_"} {
		if len(t) > len(p) && strings.EqualFold(t[:len(p)], p) {
			return true
		}
	}
	return false
}
