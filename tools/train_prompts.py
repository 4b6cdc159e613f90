"""The prompt corpus that `specatlas train` distills the target on: instructions written for this
project (no benchmark's questions), varied in task and register like a chat assistant's traffic:
writing, role play, reasoning, arithmetic, code, extraction, science, humanities, translation,
summarization, factual questions and answering from a given passage.

Each prompt's id is its position in PROMPTS; append new entries at the end so cached data stays valid.
"""

from __future__ import annotations

TASKS: list[tuple[str, tuple[str, ...]]] = [
    ("Write a short story about {}.", (
        "a lighthouse keeper who finds a message in a bottle", "a robot learning to paint",
        "two strangers sharing an umbrella", "a village where it never stops snowing",
        "a lost dog finding its way home", "a clockmaker who can pause time",
        "the last bookshop in a busy city", "a child who befriends a dragon",
        "an astronaut returning to an empty Earth", "a baker who wins a national contest",
        "a musician who loses her hearing", "a cat that runs a small hotel",
    )),
    ("Draft a speech for {}.", (
        "a high school graduation ceremony", "the opening of a community library",
        "a retirement party for a beloved teacher", "a charity run for clean water",
        "a wedding toast by the best friend", "the launch of a small tech startup",
        "a town meeting about a new park", "an award for volunteer firefighters",
        "the first day of a science fair", "a farewell to a departing team leader",
    )),
    ("You are {}. Answer a visitor who asks what your typical day looks like.", (
        "a zookeeper caring for elephants", "a medieval blacksmith", "a deep-sea research diver",
        "a nurse on the night shift", "a park ranger in a national forest", "a pastry chef in Paris",
        "a pilot of a cargo plane", "a librarian in a small town", "a beekeeper on a hillside farm",
        "a primary school teacher", "a game developer at a small studio", "a ship captain",
    )),
    ("Imagine you are {}. Write a diary entry about an unexpected event.", (
        "an explorer crossing the Sahara", "a student on an exchange year in Japan",
        "a gardener tending a royal palace", "a taxi driver in New York",
        "a scientist at a polar station", "a knight guarding a castle gate",
        "a street musician in Lisbon", "a volunteer at an animal shelter",
        "a train conductor on a night train", "a fisherman off the coast of Norway",
    )),
    ("Reason step by step and answer: {}", (
        "If all roses are flowers and some flowers fade quickly, must some roses fade quickly?",
        "Anna is taller than Ben, and Ben is taller than Carl. Who is the shortest?",
        "A box holds red and blue marbles. If I take out three, must two share a colour?",
        "Tom is older than Sue. Sue is older than Max. Is Max older than Tom?",
        "Every even number greater than two can be split into two primes. Is 28 an example?",
        "If today is Wednesday, what day of the week will it be in 10 days?",
        "A farmer has hens and cows with 30 heads and 74 legs in total. How many cows are there?",
        "Which weighs more: a kilogram of feathers or a kilogram of iron?",
        "Five people shake hands once with each other. How many handshakes happen?",
        "If a mirror shows the time as 3:40, what is the real time?",
        "Three switches control one bulb in another room. How can you tell which switch works?",
        "Is it possible for a week to contain two Mondays in the same month? Explain.",
    )),
    ("Calculate and show your working: {}", (
        "the total price of 4 notebooks at 2.75 dollars each and 3 pens at 1.20 dollars each",
        "how long it takes to drive 270 km at 90 km per hour",
        "15 percent of 640", "the area of a circle with radius 7 cm",
        "the average of 12, 19, 23, 31 and 40", "how many minutes are in three and a half days",
        "the simple interest on 2000 dollars at 4 percent a year for 3 years",
        "the perimeter of a triangle with sides 9, 12 and 15 cm",
        "the value of 3x + 7 when x equals 12", "how many 250 ml glasses fill a 2 litre jug",
        "the cost per kilogram if 3.5 kg of rice cost 8.75 dollars",
        "the sum of all whole numbers from 1 to 50",
    )),
    ("Write a {} and explain how it works.", (
        "Python function that reverses the words in a sentence",
        "JavaScript function that removes duplicate values from an array",
        "Python class representing a simple bank account",
        "SQL query that finds the five best-selling products",
        "Python script that counts how often each letter appears in a string",
        "bash one-liner that lists the ten largest files in a folder",
        "Python function that checks whether a number is prime",
        "Java method that computes the factorial of n",
        "Python generator that yields the first n square numbers",
        "C function that swaps two integers through pointers",
        "Python function that flattens a nested list",
        "regular expression that matches a simple email address",
    )),
    ("Find and fix the bug in this code, then explain the fix: {}", (
        "def add_all(items):\n    total = 0\n    for i in range(1, len(items)):\n        total += items[i]\n    return total",
        "def is_even(n):\n    return n % 2 == 1",
        "def last(items):\n    return items[len(items)]",
        "def greet(name):\n    print('Hello, ' + name)\n    return\ngreet(42)",
        "def average(values):\n    return sum(values) / len(values)\naverage([])",
        "for i in range(10):\n    if i = 5:\n        print('five')",
        "def count_vowels(text):\n    return sum(1 for c in text if c in 'aeiou')\ncount_vowels('HELLO')",
        "numbers = [3, 1, 2]\nsorted_numbers = numbers.sort()\nprint(sorted_numbers[0])",
    )),
    ("From the text below, list every {}.\n\n{}", ()),  # filled by EXTRACTION below
    ("Explain to a curious teenager {}.", (
        "how a rainbow forms", "why we have seasons", "how the heart pumps blood",
        "what DNA does in a cell", "how airplanes stay in the air", "why ice floats on water",
        "how batteries store energy", "what causes earthquakes", "how the moon changes shape",
        "why bread rises", "how a compass finds north", "what black holes are",
    )),
    ("Describe the process of {} and why it matters.", (
        "photosynthesis in plants", "the water cycle", "digestion in the human body",
        "recycling plastic bottles", "how a bill becomes law", "vaccination building immunity",
        "soil erosion", "the formation of a star", "fermentation in yogurt",
        "plate tectonics shaping continents", "the carbon cycle", "the nitrogen cycle",
    )),
    ("Discuss the historical importance of {}.", (
        "the invention of writing", "the Silk Road", "the Magna Carta", "the steam engine",
        "the fall of the Berlin Wall", "the Renaissance in Italy", "the printing of encyclopedias",
        "the voyages of Zheng He", "the abolition of slavery", "the first Olympic Games",
        "the construction of the Panama Canal", "the discovery of penicillin",
    )),
    ("What can we learn from {}? Give a thoughtful answer.", (
        "Stoic philosophy", "the story of Icarus", "Aesop's fable of the ant and the grasshopper",
        "the life of Marie Curie", "ancient Greek democracy", "the Japanese idea of wabi-sabi",
        "the tale of the boy who cried wolf", "the works of Confucius",
        "the Dust Bowl of the 1930s", "the history of the Roman aqueducts",
    )),
    ("Translate into {}", (
        "French: My brother plays the guitar every evening after dinner.",
        "Spanish: The museum is closed on Mondays but open on holidays.",
        "German: Could you tell me how much this jacket costs?",
        "Italian: We are planning a trip to the mountains next summer.",
        "Portuguese: The children are reading books in the garden.",
        "French: Please remember to water the plants while I am away.",
        "Spanish: Our train leaves at half past seven tomorrow morning.",
        "German: I have been learning to swim since last spring.",
        "Italian: The soup needs a little more salt and pepper.",
        "Dutch: The bicycle shop is next to the bakery.",
        "English: Je voudrais réserver une table pour deux personnes ce soir.",
        "English: El perro duerme debajo de la mesa de la cocina.",
    )),
    ("Summarize this passage in three bullet points:\n\n{}", ()),  # filled by PASSAGES below
    ("Answer briefly: {}", (
        "What is the largest ocean on Earth?", "Who painted the Mona Lisa?",
        "What is the boiling point of water at sea level in Fahrenheit?",
        "Which planet is known as the Red Planet?", "What language has the most native speakers?",
        "How many bones are in the adult human body?", "What gas do plants absorb from the air?",
        "Who developed the theory of general relativity?", "What is the longest river in Africa?",
        "In which year did the First World War begin?", "What is the chemical symbol for gold?",
        "How many continents are there?",
    )),
    ("Using only the information in the passage, answer the question.\n\nPassage: {}", ()),  # READING below
    ("Give me a detailed plan for {}.", (
        "learning to play the piano in six months", "training for a first marathon",
        "organizing a neighborhood clean-up day", "moving to a new city on a budget",
        "starting a podcast about local history", "preparing for a job interview",
        "reducing household energy use", "writing a novel in one year",
        "planning a week-long trip to Japan", "building a reading habit",
        "launching an online craft shop", "teaching a child to ride a bike",
    )),
    ("What are the pros and cons of {}?", (
        "working a four-day week", "homeschooling children", "living in a big city",
        "using social media for news", "nuclear power", "owning a pet", "remote learning",
        "self-driving cars", "buying second-hand clothes", "daylight saving time",
        "open-plan offices", "a vegetarian diet",
    )),
    ("Write a {} about {}.", ()),  # FORMS below
    ("Give advice to someone who {}.", (
        "feels nervous before public speaking", "wants to make new friends after moving",
        "struggles to wake up early", "is starting their first job", "wants to eat healthier",
        "procrastinates on important tasks", "is learning a second language",
        "wants to save for a house", "feels overwhelmed by email", "is caring for an elderly parent",
    )),
    ("Classify each item as {}: {}", ()),  # CLASSIFY below
    ("Rewrite this sentence to be {}: {}", ()),  # REWRITE below
    ("Define {} and give two examples.", (
        "a metaphor", "an ecosystem", "a renewable resource", "opportunity cost", "a prime number",
        "a verb tense", "an algorithm", "a democracy", "a chemical reaction", "a food chain",
        "inflation", "an alloy",
    )),
]

EXTRACTION = [
    ("person and organization", "In April, Dr. Helen Park joined the Northfield Institute after ten years at Brightwave Labs, "
     "where she had worked with engineer Omar Said on solar batteries."),
    ("date and amount of money", "The invoice dated 12 June asks for 450 euros, and a second reminder sent on 30 June "
     "added a late fee of 25 euros."),
    ("city and country", "After studying in Lyon, France, Keiko moved to Osaka in Japan, and later opened a cafe in "
     "Vancouver, Canada."),
    ("ingredient and quantity", "Mix 200 grams of flour with two eggs, add 300 millilitres of milk and a pinch of salt, "
     "then fry the batter in a spoonful of butter."),
    ("product and its price", "The shop sells a desk lamp for 35 dollars, a wooden chair for 80 dollars and a set of "
     "notebooks for 12 dollars."),
    ("event and its year", "The bridge opened in 1932, was damaged by a flood in 1957 and was rebuilt in 1961 with "
     "steel supports."),
    ("animal and its habitat", "Polar bears hunt on Arctic sea ice, camels cross hot deserts, and otters live along "
     "rivers and rocky coasts."),
    ("task and its deadline", "Please send the draft report by Friday, book the meeting room before Tuesday, and "
     "finish the budget review by the end of the month."),
]
PASSAGES = [
    "Octopuses have three hearts and blue blood. Two hearts move blood through the gills, while the third pumps it "
    "to the rest of the body. Their arms contain many neurons, so each arm can react to touch and taste on its own. "
    "They are known for solving puzzles and escaping from tanks in aquariums.",
    "Composting turns kitchen scraps and garden waste into rich soil. Microbes break down the material when it has "
    "the right mix of moisture, air and carbon-rich and nitrogen-rich ingredients. Turning the pile speeds up the "
    "process, and finished compost improves soil structure and helps plants grow.",
    "The first public railways in the nineteenth century changed how people lived and worked. Goods could move "
    "quickly between factories and ports, towns grew around stations, and standard time zones were introduced so "
    "that timetables made sense across long distances.",
    "Sleep is divided into stages that repeat through the night. Deep sleep helps the body repair itself, while "
    "dream sleep supports memory and learning. Adults who regularly sleep less than seven hours are more likely "
    "to have trouble concentrating and to catch colds.",
    "Glaciers form where more snow falls in winter than melts in summer. Over many years the snow is pressed into "
    "ice that slowly flows downhill under its own weight. As glaciers move, they carve valleys and carry rocks far "
    "from where they started.",
    "Many cities are planting trees along streets to fight summer heat. Trees shade pavements and cool the air "
    "through the water they release from their leaves. Studies also link green streets with lower stress and more "
    "people choosing to walk.",
    "Honey never spoils if it is stored in a sealed container. Its low water content and natural acidity stop "
    "bacteria from growing. Archaeologists have found pots of honey in ancient tombs that were still edible after "
    "thousands of years.",
    "The violin family includes the violin, viola, cello and double bass. They share a similar shape but differ "
    "in size and pitch. Players produce sound by drawing a bow across the strings or by plucking them with their "
    "fingers.",
    "Electric scooters have become common in many cities. They are cheap to rent and produce no exhaust, but "
    "riders are often injured because of poor roads, and scooters left on pavements can block pedestrians and "
    "wheelchair users.",
    "Wind turbines turn moving air into electricity. The wind spins the blades, which turn a shaft connected to a "
    "generator. Turbines work best on hills and at sea, where winds are strong and steady.",
]
READING = [
    ("The Harbor Museum opens at 10 a.m. from Tuesday to Sunday and closes at 6 p.m. Entry is free for children "
     "under 12; adults pay 8 dollars. A guided tour starts every day at 2 p.m.", "When does the guided tour start, "
     "and how much would two adults and one child of eight pay?"),
    ("Mount Kessel is 2,340 metres high. The northern trail takes about five hours to the summit, and the southern "
     "trail is longer but less steep. The mountain hut near the top is open from June to September.", "Which trail "
     "should a beginner choose, and can they stay at the hut in May?"),
    ("Lina's bakery sells sourdough bread for 4 dollars and rye bread for 3 dollars. On Saturdays all bread is 25 "
     "percent off after 4 p.m. The bakery is closed on Mondays.", "How much does a sourdough loaf cost on Saturday "
     "evening?"),
    ("The river festival runs for three days in August. Boat races are held on the first day, a food market on the "
     "second and fireworks on the final night. Tickets for the fireworks must be bought in advance.", "On which day "
     "can visitors see the boat races, and what must they do to watch the fireworks?"),
    ("The company's new policy lets staff work from home on Wednesdays and Fridays. Team meetings stay in the "
     "office on Mondays. Employees must tell their manager by Friday which days they will be remote next week.",
     "Can an employee work from home on a Monday?"),
    ("Greenfield School has 420 pupils and 28 teachers. Classes start at 8:30 and end at 3:15, with lunch at "
     "12:00. The school garden is looked after by a club that meets on Thursdays.", "How many pupils are there per "
     "teacher, and when does the garden club meet?"),
    ("The library lends up to six books for three weeks. Loans can be renewed online twice unless another reader "
     "has reserved the book. Late returns cost 20 cents per book per day.", "What is the longest time a reader can "
     "keep a book that nobody has reserved?"),
    ("A recipe for four people needs 300 grams of pasta, two tomatoes, one onion and 100 grams of cheese. Cooking "
     "takes about 25 minutes.", "How much pasta and cheese are needed for six people?"),
]
FORMS = [
    ("haiku", "morning coffee"), ("limerick", "a forgetful wizard"), ("product description", "a solar-powered lantern"),
    ("short news report", "a town festival"), ("cover letter", "a job at a wildlife charity"),
    ("restaurant review", "a small noodle bar"), ("motivational quote", "learning from mistakes"),
    ("job advertisement", "a part-time gardener"), ("thank-you note", "a neighbour who fixed my fence"),
    ("song chorus", "a summer road trip"), ("travel guide entry", "a quiet island village"),
    ("children's rhyme", "brushing teeth"), ("formal complaint", "a delayed parcel"),
    ("social media post", "a new community garden"), ("sonnet opening", "the city at night"),
]
CLASSIFY = [
    ("fruit or vegetable", "apple, carrot, banana, spinach, mango, potato, cherry, onion"),
    ("mammal, bird or fish", "eagle, salmon, whale, sparrow, tuna, bat, penguin, dolphin"),
    ("positive or negative", "I loved the ending; the service was slow; what a lovely surprise; the room smelled bad"),
    ("renewable or non-renewable energy", "solar, coal, wind, natural gas, hydro, oil, geothermal"),
    ("noun, verb or adjective", "quickly run, happy, table, swim, bright, idea, write"),
    ("solid, liquid or gas at room temperature", "iron, water, oxygen, mercury, salt, helium, olive oil"),
    ("a country or a city", "Brazil, Toronto, Kenya, Oslo, Peru, Mumbai, Egypt, Sydney"),
    ("an input or an output device", "keyboard, monitor, mouse, printer, microphone, speakers, scanner"),
]
REWRITE = [
    ("more formal", "hey, can u send me the file asap?"),
    ("more polite", "Give me the report now."),
    ("simpler for a child", "Precipitation occurs when atmospheric water vapour condenses."),
    ("shorter", "In my personal opinion, I think that we should probably consider maybe leaving earlier."),
    ("more exciting", "The team won the game in the last minute."),
    ("in the passive voice", "The chef prepared a delicious meal for the guests."),
    ("in the past tense", "She walks to the market and buys fresh bread."),
    ("more persuasive", "Recycling is good for the environment."),
    ("more concise", "Due to the fact that it was raining, the picnic was cancelled by the organizers."),
    ("friendlier", "Your application has been received and will be processed."),
]


def _prompts() -> list[str]:
    fillers = {
        "From the text below": [(kind, text) for kind, text in EXTRACTION],
        "Summarize this passage": [(text,) for text in PASSAGES],
        "Using only the information": [(f"{passage}\n\nQuestion: {question}",) for passage, question in READING],
        "Write a {} about": FORMS,
        "Classify each item": CLASSIFY,
        "Rewrite this sentence": REWRITE,
    }
    out = []
    for template, subjects in TASKS:
        if subjects:
            out += [template.format(subject) for subject in subjects]
        else:
            filler = next(values for start, values in fillers.items() if template.startswith(start))
            out += [template.format(*values) for values in filler]
    return out


PROMPTS: list[str] = _prompts()


def shared_ngrams(texts: list[str], others: list[str], n: int = 8) -> set[tuple[str, ...]]:
    """Word n-grams (lowercased) that occur in both `texts` and `others`."""

    def grams(text: str) -> set[tuple[str, ...]]:
        words = text.lower().split()
        return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}

    mine = set().union(*map(grams, texts))
    return mine & set().union(*map(grams, others))
