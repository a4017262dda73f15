// Package providerreach decides whether a model request has the
// provider itself connect out on the caller's behalf: through a tool the
// provider runs (Anthropic's web fetch and web search, its MCP
// connector's mcp_servers, OpenAI's remote MCP and web search tools,
// Gemini's URL context and Google Search), a hosted
// container given network access, a model that searches the web on every
// request, or content it fetches from a URL (an image, a document or a
// file given by URL). A sandbox whose only way out is custody could use
// one to send what it holds to any host, decided by no egress policy and
// named in no record.
//
// [Check] reads the body of a request to a provider of kind anthropic,
// openai or gemini (the gateway sends every one, whatever the method or
// endpoint, batches included) and reports where it holds, at any depth:
//
//   - a member mcp_servers, web_search_options or webhook_config (not
//     null), sources in an environment (what a hosted agent mounts),
//     enable_search (not false: DashScope's), or, at the top, plugins
//     (OpenRouter's web plugin), preset (Perplexity's agent presets),
//     search_options or search_parameters (xAI's live search);
//   - a network setting (network_policy, network, networking: OpenAI's
//     hosted containers and agents, Anthropic's environments, Gemini's)
//     that is not off (networkDisabled);
//   - a URL member (url, uri, image_url, file_url, file_uri, server_url,
//     and their other spellings; file_data when it has a scheme) whose
//     string value is neither a data: URL, a path ("/v1/...", an OpenAI
//     batch line's), nor an https URL under the provider's own base URL
//     (e.g. a file of Gemini's Files API);
//   - a member "tools" (array or one tool) holding a tool whose "type" is
//     not one the caller runs itself or one the provider runs without
//     the network (function, custom, bash_*, text_editor_*, computer,
//     computer_*, browser_toolset_*, memory_*, code_execution_*,
//     tool_search_tool_*, advisor_*, computer_use*, local_shell, shell,
//     apply_patch, code_interpreter, file_search, image_generation,
//     tool_search, namespace), or a tool without a type that holds a
//     member other than a function's (name, description, input_schema,
//     ...) or Gemini's functionDeclarations, codeExecution, computerUse
//     or fileSearch; each tool's own members are read by the same rules,
//     its schemas (input_schema, parameters, ...) excepted;
//   - a "model" or "agent", or a string in a list of fallback models
//     ("models", "fallbacks", "fallback_models"), that searches the web on
//     every request (searchModel: search*, sonar*, online, compound,
//     deep-research, an OpenRouter @preset).
//
// Not read: a schema of structured output ("schema", "responseSchema",
// ...) or of a legacy "functions" list, "metadata" (stored, never acted
// on), the string variables of a
// prompt (text), and the caller's own tool-call data, which the provider
// fetches nothing from: "input" in a content block (Anthropic's
// tool_use), "args" in a functionCall and "response" in a
// functionResponse (Gemini's).
//
// Member names match whatever their case and with "_" and "-" ignored
// ("mcpServers", "MCP-SERVERS"); every member of a repeated name is
// read, since parsers differ on which one wins. A type not in the list
// is refused, so a provider's new network tool is refused until the
// operator allows provider tools (the gateway's --gateway-provider-tools).
//
// A multipart/form-data body that is not JSON is read part by part
// ([Check] with its Content-Type): a part that is one JSON document is
// checked, and in a form whose purpose is "batch" or a part of an upload
// (an OpenAI batch input file) so is every line of a UTF-8 part that
// begins with "{" or "["; other parts (audio, an image, a text) pass. A
// form parsers could read two ways is refused: a second or extended
// boundary parameter, a part whose Content-Disposition is repeated or
// names no form field.
//
// Only a body of no Content-Type, application/json, text/json,
// text/plain or any +json type is read as JSON, and it must be one
// object: a provider may read another type (Google's JSPB, a positional
// array) otherwise. A body it cannot read is an [ErrUnchecked]: another
// Content-Type, not a JSON object nor a multipart form, a part sent
// base64 or quoted-printable, a batch line that begins with "{" and is
// not JSON, or nested deeper than [MaxDepth]. (The gateway refuses,
// unread, a content-encoded body and one over its size bound.) Every
// finding and error is a refusal: the caller fails closed.
//
// The rules know Anthropic, OpenAI and Gemini, and the switches of a few
// OpenAI-compatible providers (OpenRouter, Perplexity, Groq, DashScope,
// xAI); another provider may reach out through a member or model name
// they do not know.
package providerreach
