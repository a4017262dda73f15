package gateway

import "testing"

// FINDING (low, false positive): Gemini's File Search tool is refused as
// a provider-run network tool, though it connects nowhere: it "retrieves
// knowledge from Semantic Retrieval corpora" of the caller's own
// fileSearchStores (google.golang.org/genai types.go, FileSearch:
// fileSearchStoreNames "fileSearchStores/my-file-search-store-123", topK,
// metadataFilter; ai.google.dev "File Search"). It is Gemini's counterpart
// of OpenAI's file_search, which the allow list admits as a tool "the
// provider runs without the network". Gemini's local tools are only
// functionDeclarations, codeExecution and computerUse, so a RAG agent on
// Gemini gets 403 "/tools/0 member filesearch" on the default route.
func TestAttackProviderToolsFalsePositiveGeminiFileSearch(t *testing.T) {
	e := newEnv(t, defaultPaths(nil))
	tok := e.mint(t, Grant{Providers: []string{"gemini"}}).Token
	attackExpectForwarded(t, e, tok, "gemini", "/v1beta/models/gemini-2.5-flash:generateContent",
		`{"contents":[{"role":"user","parts":[{"text":"What does our handbook say about travel expenses?"}]}],"tools":[{"fileSearch":{"fileSearchStoreNames":["fileSearchStores/handbook-123"]}}]}`)
}
