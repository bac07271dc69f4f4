package store_test

import "testing"

// A word written with combining vowel signs (Hindi, Bengali, Tamil: most
// of their words) is one term, found where the message holds it, like
// any other word.
func TestSearchFindsWordsWrittenWithVowelSigns(t *testing.T) {
	t.Parallel()
	st, plans := searchStores(t)
	g := mustGroup(t, st, 1, 2)
	hi := mustSend(t, st, g.ID, 2, "मुझे हिंदी पसंद है")
	bn := mustSend(t, st, g.ID, 2, "আমি বাংলা ভালোবাসি")
	ta := mustSend(t, st, g.ID, 2, "நான் தமிழ் பேசுவேன்")
	mustSend(t, st, g.ID, 2, "हम दिल्ली में हैं")
	plansFind(t, plans, 1, map[string][]string{
		"हिंदी":    {ref(hi)},
		"पसंद":     {ref(hi)},
		"बाहर":     nil,
		"বাংলা":    {ref(bn)},
		"ভালোবাসি": {ref(bn)},
		"தமிழ்":    {ref(ta)},
		"பேசுவேன்": {ref(ta)},
	})
}
