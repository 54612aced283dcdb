"""Closed word classes of English and the confusions learners make with them: language data, no code paths.

Two users: the realistic synthetic errors (``training/synthetic/realistic_errors.py``) draw a word's confusion from
these tables to corrupt clean text, and the suggester (``tasks/ged/word_candidates.py``) reads them backwards to propose
the word a learner meant. They live in the core so that both can import them without the core importing training.
"""

DETERMINERS = {"a": ["the", "an"], "an": ["a", "the"], "the": ["a", "this", "that"], "this": ["these", "that", "the"],
               "these": ["this", "those"], "that": ["this", "those", "the"], "those": ["these", "that"],
               "some": ["any", "a"], "any": ["some", "a"], "much": ["many", "a lot"], "many": ["much"],
               "every": ["all", "each"], "each": ["every", "all"], "all": ["every", "each"], "another": ["other"],
               "other": ["another"], "no": ["any", "not"], "my": ["the", "mine"], "our": ["the", "ours"],
               "their": ["the", "there"], "his": ["the", "him"], "her": ["the", "she"], "your": ["the", "you"]}
PREPOSITIONS = ["in", "on", "at", "to", "for", "of", "with", "by", "from", "about", "into", "during", "since",
                "over", "under", "between", "among", "through", "until", "towards", "onto", "than", "like", "as"]
PREPOSITION_PAIRS = {"in": ["on", "at", "into"], "on": ["in", "at", "about"], "at": ["in", "on", "to"],
                     "to": ["for", "at", "in"], "for": ["to", "of", "since", "during"], "of": ["for", "about", "from"],
                     "with": ["by", "to", "of"], "by": ["with", "from", "until"], "from": ["of", "since", "by"],
                     "about": ["of", "on", "for"], "into": ["in", "to"], "during": ["for", "in", "while"],
                     "since": ["for", "from"], "until": ["by", "to"], "between": ["among"], "among": ["between"]}
PRONOUNS = {"i": ["me", "my"], "me": ["i", "my", "myself"], "my": ["me", "mine"], "he": ["him", "his", "it"],
            "him": ["he", "his", "himself"], "his": ["him", "he"], "she": ["her", "he"], "her": ["she", "hers"],
            "we": ["us", "our"], "us": ["we", "our"], "our": ["us", "we"], "they": ["them", "their", "it"],
            "them": ["they", "their", "it"], "their": ["them", "they"], "it": ["this", "they", "them"],
            "its": ["it", "their"], "you": ["your", "yourself"], "who": ["which", "that", "whom"],
            "which": ["who", "what", "that"], "whom": ["who", "which"], "what": ["which", "that"],
            "themselves": ["them", "theirselves"], "myself": ["me", "i"], "one": ["it", "ones"]}
CONJUNCTIONS = {"and": ["but", "or", "so"], "but": ["and", "so", "although"], "or": ["and", "nor"],
                "so": ["because", "and", "but"], "because": ["so", "because of", "that"],
                "although": ["but", "despite", "even"], "if": ["when", "whether", "that"], "when": ["if", "while"],
                "while": ["when", "during"], "than": ["then", "that"], "that": ["what", "which", "than"]}
AUXILIARIES = {"is", "are", "was", "were", "am", "be", "been", "have", "has", "had", "do", "does", "did", "will"}
MODALS_TENSE = {"will": "would", "would": "will", "can": "could", "could": "can", "is": "was", "was": "is",
                "are": "were", "were": "are", "has": "had", "have": "had", "had": "have", "am": "was",
                "shall": "should", "may": "might"}
AGREEMENT = {"is": "are", "are": "is", "was": "were", "were": "was", "has": "have", "have": "has", "does": "do",
             "do": "does", "am": "is", "doesn't": "don't", "don't": "doesn't", "isn't": "aren't", "aren't": "isn't",
             "wasn't": "weren't", "weren't": "wasn't", "hasn't": "haven't", "haven't": "hasn't"}
CONTRACTIONS = {"its": "it's", "it's": "its", "your": "you're", "you're": "your", "their": "they're",
                "they're": "their", "whose": "who's", "don't": "dont", "can't": "cant", "didn't": "didnt",
                "doesn't": "doesnt", "i'm": "im", "won't": "wont", "isn't": "isnt", "a lot": "alot"}
PUNCTUATION = [",", ".", ";", ":", "!", "?"]
# every preposition's confusions: its learner pairs where it has some, else any other preposition
PREPOSITION_CONFUSIONS = {p: PREPOSITION_PAIRS.get(p, [q for q in PREPOSITIONS if q != p]) for p in PREPOSITIONS}
# Read by the suggester only (the error maker's tables above are its training data and stay as they were):
# possessive determiners and pronouns (your/yours), and words learners write for one another by sound or spelling.
POSSESSIVES = {"my": "mine", "your": "yours", "her": "hers", "our": "ours", "their": "theirs"}
HOMOPHONES = {"to": ["too", "two"], "too": ["to", "two"], "two": ["to", "too"], "then": ["than"], "than": ["then"],
              "there": ["their", "they're"], "were": ["where", "we're"], "where": ["were", "wear"],
              "wear": ["where", "were"], "lose": ["loose"], "loose": ["lose"], "affect": ["effect"],
              "effect": ["affect"], "accept": ["except"], "except": ["accept"], "quite": ["quiet"],
              "quiet": ["quite"], "advice": ["advise"], "advise": ["advice"], "whether": ["weather"],
              "weather": ["whether"], "live": ["life"], "life": ["live"], "piece": ["peace"], "peace": ["piece"],
              "past": ["passed"], "passed": ["past"], "know": ["now", "no"], "now": ["know", "no"],
              "no": ["know", "now"], "of": ["off"], "off": ["of"], "an": ["and"], "and": ["an"], "hear": ["here"],
              "here": ["hear"], "whose": ["who's"], "who's": ["whose"], "your": ["you're"], "you're": ["your"],
              "which": ["witch"], "chose": ["choose"], "choose": ["chose"], "way": ["weigh"], "buy": ["by"],
              "by": ["buy"], "week": ["weak"], "weak": ["week"], "new": ["knew"], "knew": ["new"],
              "threw": ["through"], "through": ["threw", "thorough"], "thorough": ["through"], "though": ["thought"],
              "thought": ["though"]}
