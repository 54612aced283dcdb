"""Word tables only the synthetic error maker needs (training/synthetic/realistic_errors.py); the closed word
classes and their confusions, which the suggester reads too, are in ``electra_detect/word_classes.py``."""

UNCOUNTABLE = ["information", "advice", "furniture", "equipment", "news", "homework", "knowledge", "luggage",
               "baggage", "research", "money", "music", "traffic", "weather", "work", "evidence", "progress",
               "accommodation", "software", "staff", "experience", "behaviour", "damage", "feedback"]
MERGES = {("every", "day"): "everyday", ("a", "lot"): "alot", ("some", "times"): "sometimes",
          ("any", "more"): "anymore", ("in", "to"): "into", ("can", "not"): "cannot", ("every", "one"): "everyone",
          ("no", "one"): "noone", ("any", "one"): "anyone", ("some", "one"): "someone", ("may", "be"): "maybe",
          ("at", "least"): "atleast", ("in", "spite"): "inspite", ("each", "other"): "eachother"}
SPLITS = {"into": "in to", "cannot": "can not", "everyone": "every one", "sometimes": "some times",
          "maybe": "may be", "anyway": "any way", "nowadays": "now a days", "everyday": "every day",
          "together": "to gether", "without": "with out", "already": "all ready", "himself": "him self"}
CONTENT_TAGS = {"NN", "NNS", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "JJ", "JJR", "JJS", "RB"}
NUMBER_WORDS = {"a", "an", "one", "many", "several", "few", "these", "those", "both", "two", "three", "four", "five"}
NOMINAL_LEFT = {"DT", "PRP$", "POS", "CD", "JJ", "JJR", "JJS", "NN", "NNS", "NNP", "WDT", "PDT"}  # no article here
